package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/spf13/cobra"

	"github.com/betcode-dev/betcode/shared/release"
)

// updateOptions are update's flags.
type updateOptions struct {
	baseURL   string
	signers   string
	check     bool
	noRestart bool
	binary    string
}

func newUpdateCmd() *cobra.Command {
	var o updateOptions
	cmd := &cobra.Command{
		Use:   "update",
		Short: "Replace this binary with the release's and restart the service",
		Long: `Download the release for this platform from --base-url, check checksums.txt's
signature with the release key (ssh-keygen -Y verify, as scripts/install.sh
does) and the archive's SHA-256, then replace this binary atomically (the old
one stays as betcode-agent.previous for a rollback) and restart the systemd
user service or launchd agent when there is one. It installs the release the
base URL serves whenever its version differs from this one; --check only
reports it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runUpdate(cmd.Context(), cmd.OutOrStdout(), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.baseURL, "base-url", envOr("BETCODE_UPDATE_BASE_URL", release.DefaultBaseURL), "the release's URL (env BETCODE_UPDATE_BASE_URL)")
	f.StringVar(&o.signers, "allowed-signers", os.Getenv("BETCODE_UPDATE_ALLOWED_SIGNERS"), "trust this allowed_signers file instead of the release key (env BETCODE_UPDATE_ALLOWED_SIGNERS; test releases)")
	f.BoolVar(&o.check, "check", false, "only report the release's version")
	f.BoolVar(&o.noRestart, "no-restart", false, "do not restart the service")
	f.StringVar(&o.binary, "binary", "", "the binary to replace (default: this one)")
	return cmd
}

func runUpdate(ctx context.Context, out io.Writer, o updateOptions) error {
	fetch := release.Fetcher{BaseURL: o.baseURL}
	if o.signers != "" {
		b, err := os.ReadFile(o.signers)
		if err != nil {
			return fmt.Errorf("--allowed-signers: %w", err)
		}
		fetch.AllowedSigners = b
		fmt.Fprintf(out, "trusting the signers in %s (not the release key)\n", o.signers)
	}
	rel, err := fetch.Find(ctx, "betcode-agent", runtime.GOOS, runtime.GOARCH)
	if err != nil {
		return fmt.Errorf("update: %w", err)
	}
	if strings.TrimPrefix(rel.Version, "v") == strings.TrimPrefix(version, "v") {
		fmt.Fprintf(out, "betcode-agent %s is up to date (the release at %s is %s)\n", version, o.baseURL, rel.Version)
		return nil
	}
	if o.check {
		fmt.Fprintf(out, "betcode-agent %s; the release at %s is %s: run betcode-agent update\n", version, o.baseURL, rel.Version)
		return nil
	}
	exe := o.binary
	if exe == "" {
		if exe, err = os.Executable(); err != nil {
			return fmt.Errorf("locate this binary (set --binary): %w", err)
		}
	}
	if r, err := filepath.EvalSymlinks(exe); err == nil {
		exe = r
	}
	bin, err := fetch.Binary(ctx, rel, "betcode-agent")
	if err != nil {
		return fmt.Errorf("update: %w", err)
	}
	fmt.Fprintf(out, "%s: signature and SHA-256 good\n", rel.Archive)
	if err := release.Replace(exe, bin); err != nil {
		return fmt.Errorf("update: %w", err)
	}
	fmt.Fprintf(out, "replaced %s: %s -> %s (the old one is %s%s)\n", exe, version, rel.Version, exe, release.PreviousSuffix)
	if o.noRestart {
		fmt.Fprintln(out, "not restarted (--no-restart): restart betcode-agent serve to run the new version")
		return nil
	}
	return restartService(ctx, out)
}

// restartService restarts the agent's user service when one runs, else
// says what to do.
func restartService(ctx context.Context, out io.Writer) error {
	switch runtime.GOOS {
	case "linux":
		if _, err := exec.LookPath("systemctl"); err == nil &&
			exec.CommandContext(ctx, "systemctl", "--user", "is-active", "--quiet", "betcode-agent").Run() == nil {
			if msg, err := exec.CommandContext(ctx, "systemctl", "--user", "restart", "betcode-agent").CombinedOutput(); err != nil {
				return fmt.Errorf("restart the service (systemctl --user restart betcode-agent): %w: %s", err, strings.TrimSpace(string(msg)))
			}
			fmt.Fprintln(out, "restarted the service (systemctl --user restart betcode-agent)")
			return nil
		}
	case "darwin":
		target := fmt.Sprintf("gui/%d/%s", os.Getuid(), launchdLabel)
		if exec.CommandContext(ctx, "launchctl", "print", target).Run() == nil {
			if msg, err := exec.CommandContext(ctx, "launchctl", "kickstart", "-k", target).CombinedOutput(); err != nil {
				return fmt.Errorf("restart the launchd agent (launchctl kickstart -k %s): %w: %s", target, err, strings.TrimSpace(string(msg)))
			}
			fmt.Fprintln(out, "restarted the launchd agent", launchdLabel)
			return nil
		}
	}
	fmt.Fprintln(out, "no betcode-agent service runs here: restart betcode-agent serve yourself to run the new version")
	return nil
}
