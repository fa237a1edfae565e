package fakegitlab

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

func get(t *testing.T, url, token string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("PRIVATE-TOKEN", token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func TestServer(t *testing.T) {
	s, err := Start(Config{Token: "tok", Projects: []*Project{SampleProject(3, "g/sub/r", 45, 5)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	api := s.URL() + "/api/v4/projects/"
	tests := []struct {
		name, path, token string
		fail              []Failure
		wantStatus        int
		wantHeader        map[string]string
		wantBody          string
		wantItems         int
	}{
		{name: "page 2 of 3", path: "g%2Fsub%2Fr/merge_requests?state=all&per_page=20&page=2", token: "tok", wantStatus: 200,
			wantHeader: map[string]string{"X-Total": "45", "X-Total-Pages": "3", "X-Next-Page": "3", "X-Prev-Page": "1", "X-Page": "2", "X-Per-Page": "20"}, wantItems: 20},
		{name: "last page", path: "3/issues?per_page=20&page=3", token: "tok", wantStatus: 200, wantHeader: map[string]string{"X-Next-Page": ""}, wantItems: 5},
		{name: "per_page capped", path: "3/pipelines?per_page=500", token: "tok", wantStatus: 200, wantHeader: map[string]string{"X-Per-Page": "100"}, wantItems: 45},
		{name: "no token", path: "3/issues", wantStatus: 401, wantBody: `{"message":"401 Unauthorized"}`},
		{name: "unknown project", path: "g%2Fnope/issues", token: "tok", wantStatus: 404, wantBody: `{"message":"404 Project Not Found"}`},
		{name: "unknown job", path: "3/jobs/1/trace", token: "tok", wantStatus: 404},
		{name: "trace", path: "3/jobs/1003/trace", token: "tok", wantStatus: 200, wantBody: SampleLog(5)},
		{name: "scripted 429", path: "3/issues", token: "tok", fail: []Failure{{Status: 429, RetryAfter: "7"}}, wantStatus: 429,
			wantHeader: map[string]string{"Retry-After": "7"}, wantBody: "Retry later\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s.FailNext(tc.fail...)
			resp, body := get(t, api+tc.path, tc.token)
			if resp.StatusCode != tc.wantStatus {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.wantStatus, body)
			}
			for k, v := range tc.wantHeader {
				if got := resp.Header.Get(k); got != v {
					t.Fatalf("%s = %q, want %q", k, got, v)
				}
			}
			if tc.wantBody != "" && strings.TrimSpace(body) != strings.TrimSpace(tc.wantBody) {
				t.Fatalf("body %q, want %q", body, tc.wantBody)
			}
			if tc.wantItems > 0 {
				var items []map[string]any
				if err := json.Unmarshal([]byte(body), &items); err != nil || len(items) != tc.wantItems {
					t.Fatalf("%d items (%v), want %d", len(items), err, tc.wantItems)
				}
			}
		})
	}
	if link := func() string { r, _ := get(t, api+"3/issues?page=2", "tok"); return r.Header.Get("Link") }(); !strings.Contains(link, `page=3&per_page=20>; rel="next"`) || !strings.Contains(link, `rel="first"`) {
		t.Fatalf("Link = %s", link)
	}
	if n := len(s.Requests()); n != len(tests)+1 {
		t.Fatalf("%d requests recorded, want %d", n, len(tests)+1)
	}
}
