package codex

import (
	"fmt"
	"strings"

	"github.com/betcode-dev/betcode/agent/provider"
)

// TurnInput converts a user message to turn/start's input. Text blocks are
// joined into one text input; image blocks (the Anthropic Messages shape:
// base64 data and a media type, or an https URL) become image inputs with a
// data: URL, which Codex passes to the model as input_image, so no file is
// written. Other attachments are named in the text, as openai-api does.
func TurnInput(t provider.Turn) []UserInput {
	if len(t.Blocks) == 0 {
		return []UserInput{{Type: InputText, Text: t.Text}}
	}
	var parts []string
	var images []UserInput
	for _, b := range t.Blocks {
		switch b["type"] {
		case "text":
			if s, ok := b["text"].(string); ok {
				parts = append(parts, s)
			}
		case "image":
			if u := imageURL(b); u != "" {
				images = append(images, UserInput{Type: InputImage, URL: u})
				continue
			}
			parts = append(parts, "[an image in a form the codex provider cannot send was left out]")
		default:
			parts = append(parts, fmt.Sprintf("[a %v attachment was left out: the codex provider sends text and images only]", b["type"]))
		}
	}
	in := make([]UserInput, 0, 1+len(images))
	if len(parts) > 0 || len(images) == 0 {
		in = append(in, UserInput{Type: InputText, Text: strings.Join(parts, "\n\n")})
	}
	return append(in, images...)
}

// imageURL is the URL of an image block: a data: URL of base64 data, or
// the block's https URL; "" for another source.
func imageURL(b map[string]any) string {
	src, _ := b["source"].(map[string]any)
	switch src["type"] {
	case "base64":
		mt, _ := src["media_type"].(string)
		data, _ := src["data"].(string)
		if strings.HasPrefix(mt, "image/") && data != "" {
			return "data:" + mt + ";base64," + data
		}
	case "url":
		if u, _ := src["url"].(string); strings.HasPrefix(u, "https://") {
			return u
		}
	}
	return ""
}
