package promtest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// repo is the repository root, from this package's directory.
const repo = "../.."

// TestDeployRules checks deploy/prometheus/alerts.yaml and runs its unit
// tests (alerts_test.yaml).
func TestDeployRules(t *testing.T) {
	dir := filepath.Join(repo, "deploy", "prometheus")
	Run(t, nil, "check", "rules", filepath.Join(dir, "alerts.yaml"))
	Run(t, nil, "test", "rules", filepath.Join(dir, "alerts_test.yaml"))
}

var metricName = regexp.MustCompile(`\bbetcode_(?:relay|agent)_[a-z_]+`)

// TestDeployNamesDocumentedMetrics keeps the dashboard and the alerts in
// step with docs/metrics.md: every betcode metric they query is documented
// there (a histogram's _bucket, _sum and _count by its own name).
func TestDeployNamesDocumentedMetrics(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(repo, "docs", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for _, n := range metricName.FindAllString(string(doc), -1) {
		documented[n] = true
	}
	dash, err := os.ReadFile(filepath.Join(repo, "deploy", "grafana", "betcode.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		UID    string `json:"uid"`
		Panels []struct {
			ID      int    `json:"id"`
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(dash, &d); err != nil {
		t.Fatalf("deploy/grafana/betcode.json: %v", err)
	}
	if d.UID == "" || len(d.Panels) == 0 {
		t.Fatalf("dashboard without uid or panels")
	}
	rules, err := os.ReadFile(filepath.Join(repo, "deploy", "prometheus", "alerts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	queries := map[string]string{"alerts.yaml": string(rules)}
	ids := map[int]bool{}
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d used twice", p.ID)
		}
		ids[p.ID] = true
		for _, tg := range p.Targets {
			queries["panel "+p.Title] += tg.Expr + "\n"
		}
	}
	for where, q := range queries {
		for _, n := range metricName.FindAllString(q, -1) {
			base := n
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if b, ok := strings.CutSuffix(n, suffix); ok && documented[b] {
					base = b
				}
			}
			if !documented[base] {
				t.Errorf("%s queries %s, which docs/metrics.md does not list", where, n)
			}
		}
	}
}
