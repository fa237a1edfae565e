package openaiapi

import (
	"encoding/json"
	"testing"
)

// FuzzParseCall feeds the model's tool arguments (untrusted) to the parser:
// it must not panic, and a call without an error has a valid input.
func FuzzParseCall(f *testing.F) {
	for _, s := range []string{`{"command":"ls"}`, `{"file_path":"a","content":"b"}`, `{"pattern":"(","path":".."}`, `[]`, `null`, ``, `{"timeout":1e99}`, `{"file_path":1}`} {
		f.Add("Bash", s)
		f.Add("Write", s)
		f.Add("Grep", s)
	}
	f.Fuzz(func(t *testing.T, name, args string) {
		c := parseCall("id", name, args)
		if !json.Valid(c.Args) {
			t.Fatalf("Args %q not JSON", c.Args)
		}
		if c.Err == nil && (c.Input == nil || c.Input.check(name) != nil) {
			t.Fatalf("call without error but input %+v", c.Input)
		}
	})
}

// FuzzDecodeHistory feeds history files (read back from disk) to the
// decoder: it must not panic, and what it accepts converts to API input.
func FuzzDecodeHistory(f *testing.F) {
	f.Add([]byte(`{"version":1,"id":"oai-1","items":[{"type":"message","role":"user","text":"hi"},{"type":"function_call","call_id":"c","name":"Bash","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":"x"}]}`))
	f.Add([]byte(`{"version":1,"id":"../x","items":[]}`))
	f.Add([]byte(`{`))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := decodeHistory(b)
		if err != nil {
			return
		}
		if !idRE.MatchString(h.ID) {
			t.Fatalf("accepted id %q", h.ID)
		}
		if got := len(h.input()); got != len(h.Items) {
			t.Fatalf("%d input items of %d", got, len(h.Items))
		}
	})
}
