package session

import (
	"encoding/base64"
	"strings"
	"unicode/utf8"

	"github.com/betcode-dev/betcode/agent/claude"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// Image types the Messages API accepts as image blocks.
var imageTypes = map[string]bool{"image/png": true, "image/jpeg": true, "image/gif": true, "image/webp": true}

// buildContent turns a message and its attachments into CLI content: images
// become image blocks, text files text blocks. Anything else is refused with
// a message that says why.
func buildContent(text string, atts []*pb.Attachment, limit int) (claude.UserContent, error) {
	if len(atts) == 0 {
		return claude.UserContent{Text: text}, nil
	}
	var blocks []map[string]any
	if text != "" {
		blocks = append(blocks, map[string]any{"type": "text", "text": text})
	}
	total := len(text)
	for i, a := range atts {
		total += len(a.Data)
		if total > limit {
			return claude.UserContent{}, invalidf("message with attachments is over the %d-byte limit (attachment %d %q)", limit, i, a.Filename)
		}
		mt := strings.ToLower(strings.TrimSpace(strings.Split(a.MimeType, ";")[0]))
		switch {
		case imageTypes[mt]:
			blocks = append(blocks, map[string]any{"type": "image", "source": map[string]any{
				"type": "base64", "media_type": mt, "data": base64.StdEncoding.EncodeToString(a.Data),
			}})
		case strings.HasPrefix(mt, "text/") || mt == "application/json" || (mt == "" && utf8.Valid(a.Data)):
			if !utf8.Valid(a.Data) {
				return claude.UserContent{}, invalidf("attachment %d %q is not valid UTF-8 text", i, a.Filename)
			}
			blocks = append(blocks, map[string]any{"type": "text", "text": "<attachment filename=\"" + a.Filename + "\">\n" + string(a.Data) + "\n</attachment>"})
		default:
			return claude.UserContent{}, invalidf("attachment %d %q has unsupported type %q (images: png, jpeg, gif, webp; or text)", i, a.Filename, a.MimeType)
		}
	}
	return claude.UserContent{Blocks: blocks}, nil
}
