package fakeopenai

import (
	"net/http"
	"strings"
	"testing"
)

func TestTranscriptionsRefuseWhatOpenAIRefuses(t *testing.T) {
	f, err := StartTranscriptions("", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	res, err := http.Post(f.Endpoint(), "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusBadRequest {
		t.Errorf("a JSON body: %d, want 400", res.StatusCode)
	}
	res, err = http.Get(f.URL() + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusNotFound || len(f.OtherRequests()) != 1 {
		t.Errorf("another path: %d (others %q), want 404 recorded", res.StatusCode, f.OtherRequests())
	}
}
