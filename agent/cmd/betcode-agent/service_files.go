package main

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"strings"
	"time"
)

// serviceSpec is what a service file runs: Binary serve Args, with PATH set
// (a service manager's PATH rarely has npm's bin directory, and Claude's
// tools need the user's).
type serviceSpec struct {
	Binary       string   // absolute path of betcode-agent
	Args         []string // after "serve"
	Path         string   // PATH of the agent and its Claude processes
	DrainTimeout time.Duration
	LogFile      string // launchd: stdout and stderr (systemd has the journal)
}

// stopMargin is added to the drain timeout for the service manager's stop
// timeout: after the drain the agent stops each Claude process (end_session,
// then SIGTERM and SIGKILL 3s apart) and commits the event log.
const stopMargin = 30 * time.Second

// stopTimeout is how long the service manager waits for the agent to exit
// after SIGTERM before killing it, in whole seconds.
func (s serviceSpec) stopTimeout() int {
	return int((s.DrainTimeout + stopMargin + time.Second - 1) / time.Second)
}

// systemdUnit renders the systemd user unit.
func systemdUnit(s serviceSpec) []byte {
	var b bytes.Buffer
	exec := []string{systemdQuote(s.Binary), "serve"}
	for _, a := range s.Args {
		exec = append(exec, systemdQuote(a))
	}
	fmt.Fprintf(&b, `# The BetCode agent as a systemd user service, written by
# "betcode-agent install-service" (rerun it with --force to rewrite this file;
# keep local changes in "systemctl --user edit betcode-agent" instead).
# docs/deploy-agent.md explains every line.
[Unit]
Description=BetCode agent: drive Claude Code on this machine
Documentation=https://github.com/betcode-dev/betcode/blob/main/docs/deploy-agent.md

[Service]
Type=exec
ExecStart=%s
# Secrets and settings kept out of this file (ANTHROPIC_API_KEY, BETCODE_*):
# one VAR=value a line, optional.
EnvironmentFile=-%%h/.config/betcode/agent.env
Environment=%s
Restart=on-failure
RestartSec=5s
# SIGTERM goes to the agent alone: it drains (running turns finish within
# --drain-timeout, new ones are refused), stops its Claude processes and
# commits the event log. What is left after TimeoutStopSec is killed.
KillSignal=SIGTERM
KillMode=mixed
TimeoutStopSec=%ds
# Hardening that works in a user unit. No sandboxing of files or /tmp:
# Claude works in your projects wherever they are, and user units cannot
# mount namespaces without unprivileged user namespaces.
NoNewPrivileges=yes
LockPersonality=yes
RestrictRealtime=yes
RestrictSUIDSGID=yes
SystemCallArchitectures=native
UMask=0077

[Install]
WantedBy=default.target
`, strings.Join(exec, " "), systemdQuote("PATH="+s.Path), s.stopTimeout())
	return b.Bytes()
}

// systemdQuote quotes one word of a unit file's command line or assignment:
// specifiers (%) and variables ($) are escaped so that it is taken as is.
func systemdQuote(w string) string {
	w = strings.NewReplacer("%", "%%", "$", "$$").Replace(w)
	if w != "" && !strings.ContainsAny(w, " \t\"'\\;") {
		return w
	}
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(w) + `"`
}

// launchdLabel is the launchd job's label and the plist's base name.
const launchdLabel = "dev.betcode.agent"

// launchdPlist renders the launchd agent (~/Library/LaunchAgents).
func launchdPlist(s serviceSpec) []byte {
	var b bytes.Buffer
	str := func(v string) string {
		var e bytes.Buffer
		_ = xml.EscapeText(&e, []byte(v))
		return "<string>" + e.String() + "</string>"
	}
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<!-- The BetCode agent as a launchd agent, written by "betcode-agent install-service".
     launchd sends SIGTERM on unload; the agent drains (running turns finish within
     drain-timeout) and is killed after ExitTimeOut seconds. docs/deploy-agent.md. -->
<plist version="1.0">
<dict>
	<key>Label</key>
	` + str(launchdLabel) + `
	<key>ProgramArguments</key>
	<array>
`)
	for _, a := range append([]string{s.Binary, "serve"}, s.Args...) {
		b.WriteString("\t\t" + str(a) + "\n")
	}
	fmt.Fprintf(&b, `	</array>
	<key>EnvironmentVariables</key>
	<dict>
		<key>PATH</key>
		%s
	</dict>
	<key>RunAtLoad</key>
	<true/>
	<key>KeepAlive</key>
	<dict>
		<key>SuccessfulExit</key>
		<false/>
	</dict>
	<key>ThrottleInterval</key>
	<integer>5</integer>
	<key>ExitTimeOut</key>
	<integer>%d</integer>
	<key>Umask</key>
	<integer>63</integer>
	<key>ProcessType</key>
	<string>Standard</string>
	<key>StandardOutPath</key>
	%s
	<key>StandardErrorPath</key>
	%s
</dict>
</plist>
`, str(s.Path), s.stopTimeout(), str(s.LogFile), str(s.LogFile))
	return b.Bytes()
}
