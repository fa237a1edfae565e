// Package browsertest runs the web app's browser scripts (web/e2e/*.mjs:
// playwright-core driving Debian's chromium) from Go tests: it checks that
// node, chromium and web/e2e's node_modules are there (failing with the
// command that installs them, never skipping), runs a script, answers its
// sync points and returns its JSON result. The relay's and the agent's
// end-to-end tests share it.
package browsertest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Wait answers a script's sync point: the answer is written back as one
// JSON line.
type Wait func(name string, msg map[string]any) any

// Options is one run of a script.
type Options struct {
	// Script is the file in web/e2e to run.
	Script string
	// BaseURL is the app's address, Token the bearer token to log in with.
	BaseURL, Token string
	// Params are the script's parameters (BETCODE_E2E, as JSON).
	Params any
	// OnWait answers the script's sync points; nil answers {}.
	OnWait Wait
	// Timeout bounds the run (default 150 s).
	Timeout time.Duration
	// ChromiumArgs are more browser flags (see web/e2e/lib/harness.mjs).
	ChromiumArgs []string
}

// Dir is web/e2e of the repository.
func Dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "web", "e2e")
}

// Require fails the test, with the command that installs them, when
// node, chromium or web/e2e's node_modules are missing or stale.
func Require(t testing.TB) {
	t.Helper()
	var missing []string
	if _, err := exec.LookPath("node"); err != nil {
		missing = append(missing, "node")
	}
	chromium := os.Getenv("BETCODE_CHROMIUM")
	if chromium == "" {
		chromium = "/usr/bin/chromium"
	}
	if _, err := os.Stat(chromium); err != nil {
		missing = append(missing, chromium)
	}
	if err := nodeModulesFresh(Dir()); err != nil {
		missing = append(missing, err.Error())
	}
	if len(missing) > 0 {
		// Never skipped: CI (CI=true) and developers run make test-deps.
		t.Fatalf("the browser tests need %s: run `make test-deps` (apt-get install chromium; npm ci in web/e2e)",
			strings.Join(missing, ", "))
	}
}

// nodeModulesFresh checks that dir/node_modules holds the playwright-core
// version dir/package.json pins.
func nodeModulesFresh(dir string) error {
	var pkg struct {
		Dependencies map[string]string `json:"dependencies"`
	}
	var inst struct {
		Version string `json:"version"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "package.json"))
	if err == nil {
		err = json.Unmarshal(b, &pkg)
	}
	if err != nil {
		return fmt.Errorf("web/e2e/package.json (%v)", err)
	}
	b, err = os.ReadFile(filepath.Join(dir, "node_modules", "playwright-core", "package.json"))
	if err == nil {
		err = json.Unmarshal(b, &inst)
	}
	if err != nil {
		return errors.New("web/e2e/node_modules")
	}
	if want := pkg.Dependencies["playwright-core"]; inst.Version != want {
		return fmt.Errorf("playwright-core %s in web/e2e/node_modules (have %s)", want, inst.Version)
	}
	return nil
}

// Run runs node web/e2e/<script>, answers its sync points and
// returns its result; a failed script fails the test with its error, its
// page errors and where its screenshot and DOM were saved.
func Run(t testing.TB, o Options) json.RawMessage {
	t.Helper()
	Require(t)
	if o.Timeout == 0 {
		o.Timeout = 150 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.Timeout)
	defer cancel()
	params, err := json.Marshal(o.Params)
	if err != nil {
		t.Fatal(err)
	}
	artifacts := filepath.Join(t.TempDir(), "artifacts")
	if dir := os.Getenv("BETCODE_E2E_ARTIFACTS"); dir != "" {
		artifacts = filepath.Join(dir, strings.ReplaceAll(t.Name(), "/", "_"))
	}
	cmd := exec.CommandContext(ctx, "node", o.Script)
	cmd.Dir = Dir()
	cmd.Env = append(os.Environ(), "BETCODE_BASE_URL="+o.BaseURL, "BETCODE_TOKEN="+o.Token,
		"BETCODE_E2E="+string(params), "BETCODE_ARTIFACTS="+artifacts, "BETCODE_CHROMIUM_ARGS="+strings.Join(o.ChromiumArgs, "\n"))
	// The browser is node's child: end the whole process group.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var result json.RawMessage
	var failure string
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var msg map[string]any
		if err := json.Unmarshal(line, &msg); err != nil {
			t.Logf("%s: %s", o.Script, line)
			continue
		}
		switch {
		case msg["log"] != nil:
			t.Logf("%s %5.1fs: %s", o.Script, time.Since(start).Seconds(), line)
		case msg["wait"] != nil:
			name, _ := msg["wait"].(string)
			var answer any = map[string]any{}
			if o.OnWait != nil {
				answer = o.OnWait(name, msg)
			}
			b, _ := json.Marshal(answer)
			if _, err := stdin.Write(append(b, '\n')); err != nil {
				t.Errorf("%s: answer %s: %v", o.Script, name, err)
			}
		case msg["result"] != nil:
			var r struct {
				Result json.RawMessage `json:"result"`
			}
			_ = json.Unmarshal(line, &r)
			result = r.Result
		case msg["error"] != nil:
			failure = string(line)
		}
	}
	stdin.Close()
	err = cmd.Wait()
	if failure != "" || err != nil || result == nil {
		var f struct {
			Error      string   `json:"error"`
			Artifacts  []string `json:"artifacts"`
			PageErrors []string `json:"pageErrors"`
		}
		_ = json.Unmarshal([]byte(failure), &f)
		t.Fatalf("%s failed after %s (%v):\n%s\npage errors: %q\nartifacts: %q\nstderr:\n%s", o.Script,
			time.Since(start).Round(time.Millisecond), err, f.Error, f.PageErrors, f.Artifacts, stderr.String())
	}
	t.Logf("%s done in %s", o.Script, time.Since(start).Round(time.Millisecond))
	return result
}

// FlowResult is what web/e2e/flow.mjs reports: the steps it did and what
// the page showed at each.
type FlowResult struct {
	Steps              []string `json:"steps"`
	MachinePicked      bool     `json:"machinePicked"`
	SessionURL         string   `json:"sessionURL"`
	SecondTabNeededLog bool     `json:"secondTabNeededLogin"`
	Start              struct {
		Text    []string `json:"text"`
		ReplyMs int      `json:"replyMs"`
	} `json:"start"`
	// LostSubscription: a tab whose hello subscriptions and first subscribe
	// were dropped on the way showed the conversation all the same.
	LostSubscription struct {
		Dropped int `json:"dropped"`
		ShownMs int `json:"shownMs"`
	} `json:"lostSubscription"`
	Permission struct {
		PromptText string `json:"promptText"`
		SeenInTab2 bool   `json:"seenInTab2"`
		FileOnDisk bool   `json:"fileOnDisk"`
		ToolCards  int    `json:"toolCards"`
	} `json:"permission"`
	Question struct {
		Texts             []string `json:"texts"`
		Reply             string   `json:"reply"`
		SubmitButtonsLeft int      `json:"submitButtonsLeft"`
	} `json:"question"`
	Cancel struct {
		StopReason       string `json:"stopReason"`
		AgentEndedMs     int    `json:"agentEndedMs"`
		StopGoneMs       int    `json:"stopGoneMs"`
		StopStillEnabled bool   `json:"stopStillEnabled"`
		LastText         string `json:"lastText"`
	} `json:"cancel"`
	Reload struct {
		AfterReloadMs int      `json:"afterReloadMs"`
		Before        []string `json:"before"`
		After         []string `json:"after"`
		Tab2          []string `json:"tab2"`
	} `json:"reload"`
	Alerts []struct {
		URL  string `json:"url"`
		Text string `json:"text"`
	} `json:"alerts"`
	AssistantTexts     []string `json:"assistantTexts"`
	ToolCards          int      `json:"toolCards"`
	Tab2AssistantTexts []string `json:"tab2AssistantTexts"`
	Tab2ToolCards      int      `json:"tab2ToolCards"`
}

// FlowMarkdown is the fake model's reply in flow.mjs's markdown step, whose
// page axe-core checks: every block the conversation renders (a heading, a
// link, a quote, a table, code with each kind of highlighted token and a
// line too long for a phone, a diff). axe-core skips the contrast of a
// one-character text: the number has four digits.
const FlowMarkdown = "## Why the nightly build is slow\n\n" +
	"The **nightly build** runs `go test` twice; see [the build docs](https://example.com/build).\n\n" +
	"> Cached packages are not rebuilt.\n\n" +
	"| step | before | after |\n| --- | --- | --- |\n| test | 42 s | 21 s |\n\n" +
	"```go\n// cacheKey names a package's build by its import path and a hash of every input, so that it stays the same across runs.\n" +
	"func cacheKey(pkg string, n int) string {\n\treturn fmt.Sprintf(\"%s-%d\", pkg, n+1000) // \"pkg-1000\"\n}\n```\n\n" +
	"```diff\n@@ -1,2 +1,2 @@\n-go test ./... && go test ./...\n+go test ./...\n```\n"

// GitChange makes dir a git checkout of one commit with an uncommitted
// change to one file, for flow.mjs's changes step.
func GitChange(dir string) error {
	git := func(args ...string) error {
		cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=BetCode test", "-c", "user.email=test@betcode.invalid", "-c", "commit.gpgsign=false"}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("git %s: %w\n%s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	file := filepath.Join(dir, "NOTES.md")
	if err := git("init", "-q"); err != nil {
		return err
	}
	if err := os.WriteFile(file, []byte("# Notes\n\nThe build runs the tests twice.\n"), 0o644); err != nil {
		return err
	}
	if err := git("add", "NOTES.md"); err != nil {
		return err
	}
	if err := git("commit", "-q", "-m", "notes"); err != nil {
		return err
	}
	return os.WriteFile(file, []byte("# Notes\n\nThe build runs the tests once.\nCached packages are not rebuilt.\n"), 0o644)
}
