package webapi

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strings"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// Voice dictation (docs/web-api.md, "Voice"): POST /api/voice/transcriptions
// is VoiceService.Transcribe on the machine, which sends the audio to the
// transcription endpoint it is configured with. Audio must never reach the
// relay in clear: the relay's handler refuses the route before reading the
// body, and the web app sends it only inside the machine's end-to-end
// channel (docs/e2ee-wire.md §2), or to an agent's own --http-listen.

// maxAudioBody bounds what the handler reads of a recording; the agent
// takes at most 3,000,000 bytes of audio and says so itself
// (AUDIO_TOO_LARGE), this only stops a larger body from being read.
const maxAudioBody = 4 << 20

// maxVoiceJSON bounds a JSON body: maxAudioBody in base64, and the rest.
const maxVoiceJSON = maxAudioBody*4/3 + 4096

// errAudioTooLarge is the refusal of a body over those bounds, in the
// agent's words.
var errAudioTooLarge = errors.New("the recording is over 3,000,000 bytes: dictate in shorter pieces (2 minutes at most)")

// voiceBody is the JSON form of a recording, the one a web/1 request can
// carry (its body is text).
type voiceBody struct {
	MimeType string `json:"mimeType"`
	// Base64Data is the audio in standard base64, or a data: URL.
	Base64Data string `json:"base64Data"`
	Language   string `json:"language"`
}

// Transcription is the answer of POST /api/voice/transcriptions.
type Transcription struct {
	Text  string `json:"text"`
	Model string `json:"model,omitempty"`
}

// voiceOnMachine is why dictation is refused on the relay.
const voiceOnMachine = "dictation goes to the machine only inside its end-to-end channel, never through the relay in clear"

// transcribe serves POST /api/voice/transcriptions: a body of type audio/…
// (the recording itself) or JSON {"mimeType","base64Data","language"?}.
func (h *Handler) transcribe(w http.ResponseWriter, r *http.Request, ctx context.Context, _ caller) {
	req, status, code, err := readRecording(w, r)
	if err != nil {
		writeError(w, status, code, err.Error())
		return
	}
	resp, err := pb.NewVoiceServiceClient(h.opts.Conn).Transcribe(ctx, req)
	if err != nil {
		writeGRPCError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, Transcription{Text: resp.GetText(), Model: resp.GetModel()})
}

// readRecording reads the request's recording; on error it returns the
// HTTP status and BetCode code to answer.
func readRecording(w http.ResponseWriter, r *http.Request) (*pb.TranscribeRequest, int, string, error) {
	if r.ContentLength > maxVoiceJSON {
		return nil, http.StatusRequestEntityTooLarge, "AUDIO_TOO_LARGE", errAudioTooLarge
	}
	ct := r.Header.Get("Content-Type")
	mt, _, _ := mime.ParseMediaType(ct)
	if mt != "application/json" && mt != "" {
		b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxAudioBody))
		var mbe *http.MaxBytesError
		switch {
		case errors.As(err, &mbe):
			return nil, http.StatusRequestEntityTooLarge, "AUDIO_TOO_LARGE", errAudioTooLarge
		case err != nil:
			return nil, http.StatusBadRequest, "INVALID_ARGUMENT", errors.New("reading the recording: " + err.Error())
		}
		return &pb.TranscribeRequest{Audio: b, MimeType: ct, Language: r.URL.Query().Get("language")}, 0, "", nil
	}
	var body voiceBody
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxVoiceJSON)).Decode(&body); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, http.StatusRequestEntityTooLarge, "AUDIO_TOO_LARGE", errAudioTooLarge
		}
		return nil, http.StatusBadRequest, "INVALID_ARGUMENT", errors.New("malformed JSON body: " + err.Error())
	}
	data := body.Base64Data
	if rest, ok := strings.CutPrefix(data, "data:"); ok {
		// A data: URL, as FileReader.readAsDataURL gives it.
		typ, b64, ok := strings.Cut(rest, ";base64,")
		if !ok {
			return nil, http.StatusBadRequest, "INVALID_ARGUMENT", errors.New("base64Data: a data: URL must be base64")
		}
		data = b64
		if body.MimeType == "" {
			body.MimeType = typ
		}
	}
	b, err := base64.StdEncoding.DecodeString(data)
	if err != nil {
		return nil, http.StatusBadRequest, "INVALID_ARGUMENT", errors.New("base64Data is not base64: " + err.Error())
	}
	return &pb.TranscribeRequest{Audio: b, MimeType: body.MimeType, Language: body.Language}, 0, "", nil
}
