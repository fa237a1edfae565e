package webapi

import (
	"encoding/json"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// TestOpenAPIMatchesRoutes holds the OpenAPI document to the routes the
// handler serves, both ways.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(OpenAPI(), &doc); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.1") {
		t.Errorf("openapi = %q, want 3.1.x", doc.OpenAPI)
	}
	inDoc := map[string]bool{}
	for path, ops := range doc.Paths {
		for method := range ops {
			if method == "parameters" {
				continue
			}
			inDoc[strings.ToUpper(method)+" "+path] = true
		}
	}
	h, err := New(Options{Conn: noConn{}})
	if err != nil {
		t.Fatal(err)
	}
	served := map[string]bool{}
	for _, r := range slices.Concat(h.routes(), pushRoutes, oidcRoutes) {
		served[r.Method+" "+r.Pattern] = true
	}
	for _, k := range slices.Sorted(maps.Keys(served)) {
		if !inDoc[k] {
			t.Errorf("%s is served but not in openapi.json", k)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(inDoc)) {
		if !served[k] {
			t.Errorf("%s is in openapi.json but not served", k)
		}
	}
}

func TestOpenAPIServed(t *testing.T) {
	ts := newTestServer(t, Options{})
	resp, err := http.Get(ts.srv.URL + "/api/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil || resp.StatusCode != 200 || doc["openapi"] == nil {
		t.Fatalf("GET /api/openapi.json = %d, %v", resp.StatusCode, err)
	}
}
