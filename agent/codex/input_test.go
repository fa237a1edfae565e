package codex

import (
	"encoding/json"
	"testing"

	"github.com/betcode-dev/betcode/agent/provider"
)

func TestTurnInput(t *testing.T) {
	img := func(src map[string]any) map[string]any { return map[string]any{"type": "image", "source": src} }
	tests := []struct {
		name string
		turn provider.Turn
		want string // the input as JSON
	}{
		{"text", provider.Turn{Text: "hi"}, `[{"type":"text","text":"hi"}]`},
		{"empty text", provider.Turn{}, `[{"type":"text","text":""}]`},
		{"text blocks", provider.Turn{Text: "ignored", Blocks: []map[string]any{{"type": "text", "text": "a"}, {"type": "text", "text": "b"}}},
			`[{"type":"text","text":"a\n\nb"}]`},
		{"base64 image", provider.Turn{Blocks: []map[string]any{{"type": "text", "text": "look"}, img(map[string]any{"type": "base64", "media_type": "image/png", "data": "iVBO"})}},
			`[{"type":"text","text":"look"},{"type":"image","url":"data:image/png;base64,iVBO"}]`},
		{"image only", provider.Turn{Blocks: []map[string]any{img(map[string]any{"type": "url", "url": "https://x/a.png"})}},
			`[{"type":"image","url":"https://x/a.png"}]`},
		{"unusable image", provider.Turn{Blocks: []map[string]any{img(map[string]any{"type": "url", "url": "file:///etc/passwd"})}},
			`[{"type":"text","text":"[an image in a form the codex provider cannot send was left out]"}]`},
		{"document", provider.Turn{Blocks: []map[string]any{{"type": "text", "text": "see"}, {"type": "document"}}},
			`[{"type":"text","text":"see\n\n[a document attachment was left out: the codex provider sends text and images only]"}]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := json.Marshal(TurnInput(tt.turn))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("TurnInput = %s\nwant          %s", got, tt.want)
			}
		})
	}
}
