#!/bin/sh
# Install BetCode's agent and client from a signed release (docs/install.md):
#
#   curl -fsSL https://github.com/betcode-dev/betcode/releases/latest/download/install.sh | sh -s -- --service
#
# It picks the archives for this OS and CPU, checks checksums.txt's SSH
# signature against the release key below (ssh-keygen -Y verify) and each
# archive's SHA-256 against checksums.txt, and only then installs
# betcode-agent and betcode into ~/.local/bin (--prefix). Nothing is
# installed when a check fails. With --service it also enrolls the machine
# with a relay (--relay, --relay-ca, the join token in BETCODE_JOIN_TOKEN),
# sets the agent up as a user service (systemd or launchd, through
# "betcode-agent install-service"), starts it and prints a pairing code.
set -eu

# The release key (shared/release/allowed_signers; a test keeps them equal).
RELEASE_SIGNERS='release@betcode.dev namespaces="betcode-release" ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIC/bteGaqbVCnP0RabsJ/9TYnhOMyX9Smku8Dtg44xgy'

BASE_URL=${BETCODE_INSTALL_BASE_URL:-https://github.com/betcode-dev/betcode/releases/latest/download}
PREFIX=${BETCODE_INSTALL_PREFIX:-$HOME/.local}
SIGNERS_FILE=${BETCODE_INSTALL_ALLOWED_SIGNERS:-}
SERVICE=0
DRY_RUN=0
RELAY=
RELAY_CA=
NAME=

usage() {
	cat <<USAGE
Usage: install.sh [options]

  --base-url URL          where the release is (env BETCODE_INSTALL_BASE_URL;
                          default $BASE_URL)
  --prefix DIR            install into DIR/bin (default ~/.local)
  --service               set betcode-agent up as a user service, start it and pair a device
  --relay HOST:PORT       with --service: enroll with this relay first; the join token
                          (bcj_...) comes from BETCODE_JOIN_TOKEN, never the command line
  --relay-ca FILE         the relay's CA certificate (a development relay)
  --name NAME             this machine's name on the relay (default: the hostname)
  --allowed-signers FILE  trust this allowed_signers file instead of the release key
                          (env BETCODE_INSTALL_ALLOWED_SIGNERS; for test releases)
  --dry-run               download and verify, then say what would be installed
USAGE
}

say() { printf '%s\n' "$*"; }
die() { printf 'install.sh: %s\n' "$*" >&2; exit 1; }

while [ $# -gt 0 ]; do
	case $1 in
	--base-url) BASE_URL=${2:?--base-url needs a URL}; shift 2 ;;
	--prefix) PREFIX=${2:?--prefix needs a directory}; shift 2 ;;
	--allowed-signers) SIGNERS_FILE=${2:?--allowed-signers needs a file}; shift 2 ;;
	--relay) RELAY=${2:?--relay needs HOST:PORT}; shift 2 ;;
	--relay-ca) RELAY_CA=${2:?--relay-ca needs a file}; shift 2 ;;
	--name) NAME=${2:?--name needs a name}; shift 2 ;;
	--service) SERVICE=1; shift ;;
	--dry-run) DRY_RUN=1; shift ;;
	-h | --help) usage; exit 0 ;;
	*) usage >&2; die "unknown option $1" ;;
	esac
done
BASE_URL=${BASE_URL%/}
BIN_DIR=$PREFIX/bin

case $(uname -s) in
Linux) OS=linux ;;
Darwin) OS=darwin ;;
*) die "no release for $(uname -s): BetCode's agent runs on Linux and macOS (build it from source elsewhere)" ;;
esac
case $(uname -m) in
x86_64 | amd64) ARCH=amd64 ;;
aarch64 | arm64) ARCH=arm64 ;;
*) die "no release for the $(uname -m) CPU: there are amd64 and arm64 builds" ;;
esac

command -v ssh-keygen >/dev/null 2>&1 || die "ssh-keygen checks the release's signature and is missing: install OpenSSH's client (apt-get install openssh-client)"
command -v tar >/dev/null 2>&1 || die "tar is missing"
if command -v curl >/dev/null 2>&1; then
	fetch() { curl -fsSL --proto '=https,http' -o "$2" "$1"; }
elif command -v wget >/dev/null 2>&1; then
	fetch() { wget -q -O "$2" "$1"; }
else
	die "curl or wget is needed to download the release"
fi
if command -v sha256sum >/dev/null 2>&1; then
	sha256() { sha256sum "$1" | cut -d' ' -f1; }
elif command -v shasum >/dev/null 2>&1; then
	sha256() { shasum -a 256 "$1" | cut -d' ' -f1; }
else
	die "sha256sum or shasum is needed to check the downloads"
fi

TMP=$(mktemp -d "${TMPDIR:-/tmp}/betcode-install.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
trap 'exit 1' INT TERM

say "BetCode installer: $OS/$ARCH from $BASE_URL"
fetch "$BASE_URL/checksums.txt" "$TMP/checksums.txt" || die "could not download $BASE_URL/checksums.txt"
fetch "$BASE_URL/checksums.txt.sig" "$TMP/checksums.txt.sig" || die "could not download $BASE_URL/checksums.txt.sig"
if [ -n "$SIGNERS_FILE" ]; then
	[ -r "$SIGNERS_FILE" ] || die "--allowed-signers $SIGNERS_FILE: not readable"
	cp "$SIGNERS_FILE" "$TMP/allowed_signers"
	say "trusting the signers in $SIGNERS_FILE (not the release key)"
else
	printf '%s\n' "$RELEASE_SIGNERS" >"$TMP/allowed_signers"
fi
if ! ssh-keygen -Y verify -f "$TMP/allowed_signers" -I release@betcode.dev -n betcode-release \
	-s "$TMP/checksums.txt.sig" <"$TMP/checksums.txt" >"$TMP/verify.log" 2>&1; then
	cat "$TMP/verify.log" >&2
	die "REFUSED: the signature of checksums.txt does not verify with the release key; nothing was installed"
fi
say "signature of checksums.txt: good (release@betcode.dev)"

# archive NAME: the file name of NAME's archive for this platform, from checksums.txt
# (NAME_VERSION_OS_ARCH.tar.gz; no / in it, which shared/release refuses too).
archive() {
	awk -v re="^$1_[^_/]+_${OS}_${ARCH}[.]tar[.]gz\$" '$2 ~ re { print $2; exit }' "$TMP/checksums.txt"
}

VERSION=
for b in betcode-agent betcode; do
	a=$(archive "$b")
	[ -n "$a" ] || die "the release has no $b for $OS/$ARCH; nothing was installed"
	want=$(awk -v n="$a" '$2 == n { print $1; exit }' "$TMP/checksums.txt")
	fetch "$BASE_URL/$a" "$TMP/$a" || die "could not download $BASE_URL/$a; nothing was installed"
	got=$(sha256 "$TMP/$a")
	[ "$got" = "$want" ] || die "REFUSED: $a's SHA-256 is $got, checksums.txt says $want (corrupt or tampered download); nothing was installed"
	mkdir -p "$TMP/x/$b"
	tar -xzf "$TMP/$a" -C "$TMP/x/$b" "$b" || die "could not unpack $a; nothing was installed"
	[ -f "$TMP/x/$b/$b" ] || die "$a holds no $b; nothing was installed"
	v=${a#"$b"_}
	VERSION=${v%%_*}
	say "$a: SHA-256 matches checksums.txt"
done

if [ "$DRY_RUN" = 1 ]; then
	say "dry run: would install betcode-agent and betcode $VERSION ($OS/$ARCH) into $BIN_DIR"
	if [ "$SERVICE" = 1 ]; then
		if [ "$OS" = darwin ]; then
			say "dry run: would write ~/Library/LaunchAgents/dev.betcode.agent.plist (betcode-agent install-service --manager launchd), load it with launchctl bootstrap gui/\$(id -u) and run betcode-agent pair"
		else
			say "dry run: would write ~/.config/systemd/user/betcode-agent.service (betcode-agent install-service), start it with systemctl --user enable --now betcode-agent and run betcode-agent pair"
		fi
	fi
	exit 0
fi

# Install: each binary is copied beside its destination and renamed over it,
# so a failure leaves the old one (or none) rather than half a file.
mkdir -p "$BIN_DIR" || die "cannot create $BIN_DIR"
for b in betcode-agent betcode; do
	if ! { cp "$TMP/x/$b/$b" "$BIN_DIR/.$b.new" && chmod 0755 "$BIN_DIR/.$b.new"; }; then
		rm -f "$BIN_DIR/.betcode-agent.new" "$BIN_DIR/.betcode.new"
		die "cannot write into $BIN_DIR; nothing was installed"
	fi
done
mv -f "$BIN_DIR/.betcode-agent.new" "$BIN_DIR/betcode-agent"
mv -f "$BIN_DIR/.betcode.new" "$BIN_DIR/betcode"
say "installed betcode-agent and betcode $VERSION into $BIN_DIR"
case ":${PATH:-}:" in
*":$BIN_DIR:"*) ;;
*) say "$BIN_DIR is not on your PATH: add it with
  echo 'export PATH=\"$BIN_DIR:\$PATH\"' >> ~/.profile && . ~/.profile" ;;
esac

[ "$SERVICE" = 1 ] || {
	say "Next: $BIN_DIR/betcode-agent serve (or rerun with --service to run it as a user service)"
	exit 0
}

AGENT=$BIN_DIR/betcode-agent
DATA_DIR=${BETCODE_DATA_DIR:-${XDG_DATA_HOME:-$HOME/.local/share}/betcode}

# Enrollment with a relay: the join token only from the environment.
if [ -n "$RELAY" ]; then
	if [ -f "$DATA_DIR/relay/enrollment.json" ]; then
		say "already enrolled with a relay ($DATA_DIR/relay/enrollment.json): keeping it"
	else
		[ -n "${BETCODE_JOIN_TOKEN:-}" ] || die "--relay needs the join token in BETCODE_JOIN_TOKEN (betcode-relay admin enroll-token create)"
		set -- enroll --relay "$RELAY" --data-dir "$DATA_DIR"
		[ -z "$RELAY_CA" ] || set -- "$@" --relay-ca "$RELAY_CA"
		[ -z "$NAME" ] || set -- "$@" --name "$NAME"
		"$AGENT" "$@" || die "enrolling with $RELAY failed (the binaries are installed; rerun with a new join token)"
	fi
fi

# The service file, from the agent itself (betcode-agent install-service).
if [ "$OS" = darwin ]; then
	UNIT=$HOME/Library/LaunchAgents/dev.betcode.agent.plist
else
	UNIT=${XDG_CONFIG_HOME:-$HOME/.config}/systemd/user/betcode-agent.service
fi
if [ -f "$UNIT" ]; then
	say "keeping the existing service file $UNIT (betcode-agent install-service --force rewrites it)"
else
	"$AGENT" install-service --data-dir "$DATA_DIR" || die "writing the service file failed"
fi

started=0
if [ "$OS" = darwin ]; then
	launchctl bootout "gui/$(id -u)/dev.betcode.agent" >/dev/null 2>&1 || true
	launchctl bootstrap "gui/$(id -u)" "$UNIT" && started=1
elif command -v systemctl >/dev/null 2>&1 && systemctl --user show-environment >/dev/null 2>&1; then
	systemctl --user daemon-reload && systemctl --user enable betcode-agent && systemctl --user restart betcode-agent && started=1
	[ "$started" = 0 ] || say "started the service: systemctl --user status betcode-agent; logs: journalctl --user -u betcode-agent"
fi
if [ "$started" = 0 ]; then
	# No user service manager (a container, WSL without systemd, a login
	# with no user session): run the agent now in the background.
	STATE=${XDG_STATE_HOME:-$HOME/.local/state}/betcode
	mkdir -p "$STATE"
	nohup "$AGENT" serve --data-dir "$DATA_DIR" >>"$STATE/agent.log" 2>&1 </dev/null &
	echo $! >"$STATE/agent.pid"
	say "!!! No user service manager answers here (systemctl --user): the service file is written
!!! but not started. Started the agent in the background instead (pid $!, log $STATE/agent.log);
!!! it does not restart at login. With systemd: systemctl --user enable --now betcode-agent"
fi

# Wait for the agent's socket (at most 30 s), then pair.
i=0
until "$AGENT" devices list >/dev/null 2>&1; do
	i=$((i + 1))
	[ "$i" -le 150 ] || die "the agent did not start within 30 s (see its log); pair later with: betcode-agent pair"
	sleep 0.2
done
if [ -f "$DATA_DIR/relay/enrollment.json" ]; then
	say "Pair a device: scan the code with the web app, or run the 'betcode pair' line on it."
	"$AGENT" pair
else
	say "The agent runs. Enroll it with a relay to pair a phone or laptop (docs/install.md):
  BETCODE_JOIN_TOKEN=bcj_... $AGENT enroll --relay HOST:PORT && $AGENT pair"
fi
