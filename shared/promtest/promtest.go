// Package promtest helps tests check Prometheus metrics: scrape an
// endpoint, run `promtool check metrics` on what it serves, and read a
// series' value from the text exposition format.
package promtest

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// PromtoolEnv names a promtool binary to use instead of the one on PATH.
const PromtoolEnv = "BETCODE_PROMTOOL"

// Promtool returns the path of promtool. Without it the test is skipped,
// except under CI (CI=true), where it fails: CI must install it.
func Promtool(t testing.TB) string {
	t.Helper()
	if p := os.Getenv(PromtoolEnv); p != "" {
		return p
	}
	p, err := exec.LookPath("promtool")
	if err == nil {
		return p
	}
	const how = "install it with `make test-deps` (apt-get install prometheus, or go install github.com/prometheus/prometheus/cmd/promtool@v0.301.0), or set " + PromtoolEnv
	if os.Getenv("CI") == "true" {
		t.Fatalf("promtool is missing: %v\nCI must install it before the tests: %s", err, how)
	}
	t.Skipf("promtool is missing (%v): %s", err, how)
	return ""
}

// Run runs promtool with args and stdin, failing the test with its output
// if it fails; it returns the combined output.
func Run(t testing.TB, stdin []byte, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, Promtool(t), args...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// CheckMetrics fails the test unless `promtool check metrics` reports
// nothing about text (no lint problem at all).
func CheckMetrics(t testing.TB, text []byte) {
	t.Helper()
	if out := Run(t, text, "check", "metrics"); strings.TrimSpace(out) != "" {
		t.Fatalf("promtool check metrics reported:\n%s", out)
	}
}

// Scrape returns what url serves, in the text format.
func Scrape(t testing.TB, url string) []byte {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/plain; version=0.0.4")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("scrape %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape %s: HTTP %d, %v\n%s", url, resp.StatusCode, err, b)
	}
	return b
}

// Value returns the value of the first series of metric name whose labels
// include every labels pair (name, value, name, value, ...), and whether
// there is one.
func Value(text []byte, name string, labels ...string) (float64, bool) {
	for line := range strings.Lines(string(text)) {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		series, value, ok := cutLast(line)
		if !ok {
			continue
		}
		n, set, _ := strings.Cut(series, "{")
		if n != name || !hasLabels(set, labels) {
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			return 0, false
		}
		return v, true
	}
	return 0, false
}

// cutLast splits `series value` (a timestamp, if any, is not expected).
func cutLast(line string) (series, value string, ok bool) {
	i := strings.LastIndexByte(line, ' ')
	if i < 0 {
		return "", "", false
	}
	return line[:i], line[i+1:], true
}

// hasLabels reports whether the label set `a="x",b="y"}` holds each pair.
func hasLabels(set string, labels []string) bool {
	for i := 0; i+1 < len(labels); i += 2 {
		if !strings.Contains(set, labels[i]+"="+strconv.Quote(labels[i+1])) {
			return false
		}
	}
	return true
}
