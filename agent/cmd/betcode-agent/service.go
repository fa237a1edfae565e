package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"time"

	"github.com/spf13/cobra"

	"github.com/betcode-dev/betcode/agent/config"
	"github.com/betcode-dev/betcode/agent/daemon"
)

// installOptions are install-service's flags.
type installOptions struct {
	manager   string // "systemd" or "launchd"
	print     bool
	force     bool
	binary    string
	dataDir   string
	claudeBin string
	configF   string
	drain     time.Duration
}

func newInstallServiceCmd() *cobra.Command {
	var o installOptions
	drainDefault, _ := config.Lookup("drain-timeout")
	cmd := &cobra.Command{
		Use:   "install-service [flags] [-- serve flags...]",
		Short: "Run the agent as a systemd user service (Linux) or a launchd agent (macOS)",
		Long: `Write a service file that runs "betcode-agent serve" at login and restarts it
when it fails:

  Linux   a systemd user unit, ~/.config/systemd/user/betcode-agent.service
  macOS   a launchd agent, ~/Library/LaunchAgents/` + launchdLabel + `.plist

It runs this binary (its absolute path) with --data-dir, --drain-timeout and,
when found on PATH, the absolute path of --claude-bin; serve flags after "--"
are added as given (e.g. -- --relay relay.example.com:8443). The service's
stop timeout is the drain timeout plus 30s. It prints the commands that start
the service and does not run them. An existing file is kept unless --force;
--print writes the file to stdout instead. Secrets (ANTHROPIC_API_KEY) do not
belong in the file: see docs/deploy-agent.md.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 && cmd.ArgsLenAtDash() != 0 {
				return fmt.Errorf("unexpected argument %q: put serve flags after --", args[0])
			}
			return installService(cmd.OutOrStdout(), o, args)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.manager, "manager", defaultManager(), "service manager: systemd or launchd")
	f.BoolVar(&o.print, "print", false, "print the service file instead of writing it")
	f.BoolVar(&o.force, "force", false, "overwrite an existing service file")
	f.StringVar(&o.binary, "binary", "", "betcode-agent binary the service runs (default: this one)")
	f.StringVar(&o.dataDir, "data-dir", daemon.DefaultDataDir(), "the agent's data directory")
	f.StringVar(&o.claudeBin, "claude-bin", "claude", "the Claude Code CLI (resolved on PATH now)")
	f.StringVar(&o.configF, "config", "", "config file the service reads")
	f.DurationVar(&o.drain, "drain-timeout", drainDefault.Default.(time.Duration), "how long running turns may finish when the service stops")
	return cmd
}

func defaultManager() string {
	if runtime.GOOS == "darwin" {
		return "launchd"
	}
	return "systemd"
}

func installService(out io.Writer, o installOptions, extra []string) error {
	spec, err := o.spec(extra)
	if err != nil {
		return err
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return fmt.Errorf("home directory: %w", err)
	}
	var path string
	var content []byte
	switch o.manager {
	case "systemd":
		dir := os.Getenv("XDG_CONFIG_HOME")
		if dir == "" {
			dir = filepath.Join(home, ".config")
		}
		path = filepath.Join(dir, "systemd", "user", "betcode-agent.service")
		content = systemdUnit(spec)
	case "launchd":
		path = filepath.Join(home, "Library", "LaunchAgents", launchdLabel+".plist")
		spec.LogFile = filepath.Join(home, "Library", "Logs", "betcode-agent.log")
		content = launchdPlist(spec)
	default:
		return fmt.Errorf("--manager %q: want systemd or launchd", o.manager)
	}
	if o.print {
		_, err := out.Write(content)
		return err
	}
	if _, err := os.Stat(path); err == nil && !o.force {
		return fmt.Errorf("%s exists; rerun with --force to overwrite it (or --print to see the new one)", path)
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("create %s: %w", filepath.Dir(path), err)
	}
	if err := os.WriteFile(path, content, 0o644); err != nil {
		return fmt.Errorf("write service file: %w", err)
	}
	fmt.Fprintf(out, "wrote %s\n", path)
	if o.manager == "systemd" {
		fmt.Fprintf(out, `Start it now and at every login:
  systemctl --user daemon-reload && systemctl --user enable --now betcode-agent
Keep it running while you are logged out: loginctl enable-linger %s
Logs: journalctl --user -u betcode-agent -f
`, os.Getenv("USER"))
	} else {
		fmt.Fprintf(out, `Start it now and at every login:
  launchctl bootstrap gui/$(id -u) %s
Stop it: launchctl bootout gui/$(id -u)/%s
Logs: %s
`, path, launchdLabel, spec.LogFile)
	}
	return nil
}

// spec resolves the paths the service file names: the service manager's
// working directory and PATH are not the shell's.
func (o installOptions) spec(extra []string) (serviceSpec, error) {
	bin := o.binary
	if bin == "" {
		exe, err := os.Executable()
		if err != nil {
			return serviceSpec{}, fmt.Errorf("locate this binary (set --binary): %w", err)
		}
		bin = exe
	}
	bin, err := filepath.Abs(bin)
	if err != nil {
		return serviceSpec{}, err
	}
	if r, err := filepath.EvalSymlinks(bin); err == nil {
		bin = r
	}
	if o.drain < 0 {
		return serviceSpec{}, fmt.Errorf("--drain-timeout must not be negative")
	}
	dataDir, err := filepath.Abs(o.dataDir)
	if err != nil {
		return serviceSpec{}, err
	}
	args := []string{"--data-dir", dataDir, "--drain-timeout", o.drain.String()}
	claudeBin := o.claudeBin
	if p, err := exec.LookPath(claudeBin); err == nil {
		if claudeBin, err = filepath.Abs(p); err != nil {
			return serviceSpec{}, err
		}
	}
	if claudeBin != "claude" {
		args = append(args, "--claude-bin", claudeBin)
	}
	if o.configF != "" {
		c, err := filepath.Abs(o.configF)
		if err != nil {
			return serviceSpec{}, err
		}
		args = append(args, "--config", c)
	}
	path := os.Getenv("PATH")
	if path == "" {
		path = "/usr/local/bin:/usr/bin:/bin"
	}
	return serviceSpec{Binary: bin, Args: append(args, extra...), Path: path, DrainTimeout: o.drain}, nil
}
