package transcripts

import (
	"github.com/betcode-dev/betcode/agent/claude"
)

// summary is what List reports about a transcript, built one entry at a
// time so that a scan can stop at the end of the file and resume there when
// the file grows.
type summary struct {
	offset      int64 // just past the last complete line read
	cwd         string
	firstPrompt string
	lastPreview string
	count       int    // user prompts + assistant API messages
	lastMsgID   string // of the last assistant entry, to count messages, not blocks
	badLines    int
}

// add accounts for one entry; blocks are its decoded content.
func (s *summary) add(e *entry, blocks []claude.ContentBlock) {
	if !e.mainThread() || (e.Type != typeUser && e.Type != typeAssistant) {
		return
	}
	if s.cwd == "" {
		s.cwd = e.CWD
	}
	switch e.Type {
	case typeUser:
		p, ok := e.prompt(blocks)
		if !ok {
			return
		}
		s.count++
		p = shorten(p, PromptPreviewRunes)
		if s.firstPrompt == "" {
			s.firstPrompt = p
		}
		s.lastPreview = p
	case typeAssistant:
		// The CLI writes one entry per content block; they share the
		// API message id.
		if id := e.Message.ID; id == "" || id != s.lastMsgID {
			s.count++
		}
		s.lastMsgID = e.Message.ID
		if t := assistantText(blocks); t != "" && !e.APIError && !e.APIErrorSnake {
			s.lastPreview = shorten(t, PromptPreviewRunes)
		}
	}
}
