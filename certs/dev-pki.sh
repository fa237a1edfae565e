#!/usr/bin/env bash
# Creates the development PKI in certs/dev (gitignored): a CA, the relay's
# server certificate for localhost, 127.0.0.1 and ::1, and one client
# certificate per machine id given (default: dev-machine). Re-running keeps
# what exists and adds missing machines; -f replaces everything: a new CA, a
# new relay certificate, and new certificates for the machines given and for
# every machine already in the directory (the new CA invalidates the old ones).
#
#   certs/dev-pki.sh                  # CA, relay, machines/dev-machine
#   certs/dev-pki.sh laptop desktop   # and machines/laptop, machines/desktop
#   certs/dev-pki.sh -f               # start over
#
# Environment: BETCODE_PKI_DIR (default certs/dev), BETCODE_PKI_HOSTS
# (default localhost,127.0.0.1,::1), BETCODE_RELAY (default: go run the relay
# from source, so the script never uses a stale binary).
# See certs/README.md and docs/certificates.md.
set -euo pipefail
cd "$(dirname "$0")/.."

force=()
if [[ ${1:-} == -f || ${1:-} == --force ]]; then
	force=(--force)
	shift
fi
dir=${BETCODE_PKI_DIR:-certs/dev}
hosts=${BETCODE_PKI_HOSTS:-localhost,127.0.0.1,::1}
machines=("$@")
((${#machines[@]})) || machines=(dev-machine)
if ((${#force[@]})) && [[ -d $dir/machines ]]; then
	for crt in "$dir"/machines/*.crt; do
		[[ -e $crt ]] || continue
		id=$(basename "$crt" .crt)
		[[ " ${machines[*]} " == *" $id "* ]] || machines+=("$id")
	done
fi
read -r -a relay <<<"${BETCODE_RELAY:-go run ./relay/cmd/betcode-relay}"

if [[ ${#force[@]} -eq 0 && -e $dir/ca.crt ]]; then
	echo "keeping the existing CA in $dir (-f replaces it)"
else
	"${relay[@]}" certs init --dir "$dir" --hosts "$hosts" "${force[@]}"
fi
for id in "${machines[@]}"; do
	if [[ ${#force[@]} -eq 0 && -e $dir/machines/$id.crt ]]; then
		echo "keeping $dir/machines/$id.crt"
		continue
	fi
	"${relay[@]}" certs machine --dir "$dir" --machine-id "$id" "${force[@]}"
done
