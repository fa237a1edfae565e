package fakeopenai

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/betcode-dev/betcode/shared/internal/fakecore"
)

// TranscriptionsPath is the path of OpenAI's speech-to-text endpoint.
const TranscriptionsPath = "/v1/audio/transcriptions"

// DefaultTranscript is the text a Transcriptions server answers by default.
const DefaultTranscript = "Hello from the fake transcription."

// maxUpload bounds what the fake reads of one upload.
const maxUpload = 64 << 20

// Transcription is one POST /v1/audio/transcriptions the fake received.
type Transcription struct {
	Seq            int
	Model          string // the form's model
	Language       string // the form's language, if any
	ResponseFormat string // the form's response_format, if any
	FileName       string // the file part's file name
	FileType       string // the file part's Content-Type
	Audio          []byte // the file part's bytes
	// Authorization is the request's Authorization header ("" without).
	Authorization string
}

// TranscriptionReply scripts one answer: Text with 200, or an OpenAI error
// body with Status and Message. Delay holds the answer back (until the
// client gives up or the server closes when negative).
type TranscriptionReply struct {
	Text    string
	Status  int
	Message string
	Delay   time.Duration
}

// Transcriptions is a fake OpenAI-compatible speech-to-text endpoint:
// POST /v1/audio/transcriptions (multipart form: file, model, language,
// response_format) answers {"text": ...}: a reply queued with Enqueue,
// else the server's text. Every request is recorded with its audio
// (Requests, WaitRequests); calls to other paths get 404 (OtherRequests).
type Transcriptions struct {
	*fakecore.Core[Transcription, TranscriptionReply]
	text string
}

var _ http.Handler = (*Transcriptions)(nil)

// NewTranscriptions returns a Transcriptions server answering text (""
// DefaultTranscript) that is not listening, for httptest or a mux.
func NewTranscriptions(text string, log *slog.Logger) *Transcriptions {
	if text == "" {
		text = DefaultTranscript
	}
	return &Transcriptions{Core: fakecore.New[Transcription, TranscriptionReply](log), text: text}
}

// StartTranscriptions returns a Transcriptions server answering text,
// listening on addr (default 127.0.0.1:0). Close it when done.
func StartTranscriptions(addr, text string, log *slog.Logger) (*Transcriptions, error) {
	s := NewTranscriptions(text, log)
	if err := s.Listen(addr, "fake transcriptions", s); err != nil {
		return nil, err
	}
	return s, nil
}

// Endpoint is the full URL of the transcription endpoint (the agent's
// voice-transcribe-url).
func (s *Transcriptions) Endpoint() string { return s.URL() + TranscriptionsPath }

// ServeHTTP answers POST /v1/audio/transcriptions and 404 otherwise.
func (s *Transcriptions) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != TranscriptionsPath {
		s.RecordOther(r)
		_ = writeError(w, http.StatusNotFound, "no such endpoint: "+r.Method+" "+r.URL.Path, 0)
		return
	}
	t, err := readTranscription(r)
	if err != nil {
		s.Log.Warn("fake transcriptions: bad request", "err", err)
		_ = writeError(w, http.StatusBadRequest, err.Error(), 0)
		return
	}
	reply, queued := s.Record(func(seq int) Transcription { t.Seq = seq; return t }, true)
	if !queued {
		reply = TranscriptionReply{Text: s.text}
	}
	s.Log.Info("fake transcriptions: request", "seq", t.Seq, "model", t.Model, "type", t.FileType, "bytes", len(t.Audio), "status", reply.Status)
	if !s.Sleep(r.Context(), reply.Delay) {
		return
	}
	if reply.Status != 0 && reply.Status != http.StatusOK {
		_ = writeError(w, reply.Status, reply.Message, 0)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]string{"text": reply.Text})
}

// readTranscription parses the multipart form as OpenAI's endpoint does:
// file and model are required.
func readTranscription(r *http.Request) (Transcription, error) {
	t := Transcription{Authorization: r.Header.Get("Authorization")}
	mr, err := r.MultipartReader()
	if err != nil {
		return t, errors.New("want a multipart/form-data body: " + err.Error())
	}
	for {
		p, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return t, errors.New("malformed multipart body: " + err.Error())
		}
		b, err := io.ReadAll(io.LimitReader(p, maxUpload))
		if err != nil {
			return t, errors.New("reading part " + p.FormName() + ": " + err.Error())
		}
		switch p.FormName() {
		case "file":
			t.FileName, t.FileType, t.Audio = p.FileName(), p.Header.Get("Content-Type"), b
		case "model":
			t.Model = string(b)
		case "language":
			t.Language = string(b)
		case "response_format":
			t.ResponseFormat = string(b)
		}
	}
	switch {
	case t.Audio == nil:
		return t, errors.New("you must provide a file")
	case t.Model == "":
		return t, errors.New("you must provide a model parameter")
	}
	return t, nil
}
