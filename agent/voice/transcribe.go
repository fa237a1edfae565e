package voice

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// MaxAudioBytes is the largest recording Transcribe takes: two minutes of
// speech as Opus (the web app's recorder) are about 0.5 MB, and its base64
// in a JSON body still fits one 4 MiB web/1 frame and a default gRPC
// message.
const MaxAudioBytes = 3_000_000

// DefaultModel is the transcription model asked for when voice-model is
// empty: OpenAI's, which local Whisper servers also accept.
const DefaultModel = "whisper-1"

// DefaultTimeout bounds one transcription, upload included.
const DefaultTimeout = 60 * time.Second

// maxAnswer bounds the endpoint's answer read.
const maxAnswer = 1 << 20

// Errors Transcribe returns (wrapped); the service maps them to statuses.
var (
	// ErrNotConfigured: the machine has no transcription endpoint.
	ErrNotConfigured = errors.New("voice transcription is not configured on this machine: set voice-transcribe-url (an OpenAI-compatible /v1/audio/transcriptions endpoint) and restart the agent")
	// ErrTooLarge: the recording is over MaxAudioBytes.
	ErrTooLarge = fmt.Errorf("the recording is over %d bytes: dictate in shorter pieces (2 minutes at most)", MaxAudioBytes)
	// ErrUnsupported: empty audio, or a media type that is not audio.
	ErrUnsupported = errors.New("unsupported recording")
)

// EndpointError is the transcription endpoint's refusal or failure.
type EndpointError struct {
	Status  int    // HTTP status; 0 when it was not reached or did not answer in time
	Message string // what it said (its error.message), or why it was not reached
}

func (e *EndpointError) Error() string {
	if e.Status == 0 {
		return "the transcription endpoint did not answer: " + e.Message
	}
	return fmt.Sprintf("the transcription endpoint answered %d: %s", e.Status, e.Message)
}

// BadAudio reports whether the endpoint refused the audio itself (400, 413,
// 415, 422) rather than failing or refusing the machine's key.
func (e *EndpointError) BadAudio() bool {
	switch e.Status {
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType, http.StatusUnprocessableEntity:
		return true
	}
	return false
}

// Config is the machine's transcription endpoint (agent config keys
// voice-transcribe-url, voice-model, voice-api-key, voice-api-key-file).
type Config struct {
	// URL is the full endpoint, e.g. https://api.openai.com/v1/audio/transcriptions
	// or http://127.0.0.1:8000/v1/audio/transcriptions; empty: not configured.
	URL string
	// Model is the form's model field; default DefaultModel.
	Model string
	// APIKey, or the contents of APIKeyFile, is sent as a bearer token;
	// neither may be set for an endpoint that needs none.
	APIKey, APIKeyFile string
	// Timeout bounds one transcription; default DefaultTimeout.
	Timeout time.Duration
}

// Configured reports whether an endpoint is set.
func (c Config) Configured() bool { return c.URL != "" }

// Validate checks the URL (http or https, no credentials or query in it)
// and that at most one of APIKey and APIKeyFile is set.
func (c Config) Validate() error {
	if c.URL == "" {
		return nil
	}
	u, err := url.Parse(c.URL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return fmt.Errorf("voice-transcribe-url %q: want http(s)://host/…/v1/audio/transcriptions", redact(c.URL))
	}
	if u.User != nil {
		return fmt.Errorf("voice-transcribe-url %q: put the key in voice-api-key or voice-api-key-file, not in the URL", redact(c.URL))
	}
	if c.APIKey != "" && c.APIKeyFile != "" {
		return errors.New("voice-api-key and voice-api-key-file are both set: keep one")
	}
	if strings.ContainsAny(c.Model, " \t\r\n") {
		return fmt.Errorf("voice-model %q: a model name has no spaces", c.Model)
	}
	return nil
}

// redact drops a URL's credentials and query, which may hold a key.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	u.User, u.RawQuery = nil, ""
	return u.String()
}

// Audio is one recording.
type Audio struct {
	Data     []byte
	MimeType string // e.g. audio/webm;codecs=opus
	Language string // optional ISO-639-1 hint
}

// Client transcribes recordings with one endpoint.
type Client struct {
	cfg Config
	hc  *http.Client
	log *slog.Logger
}

// New returns a Client for cfg (not configured when cfg.URL is empty: its
// Transcribe answers ErrNotConfigured). hc nil uses a client of its own;
// log nil discards.
func New(cfg Config, hc *http.Client, log *slog.Logger) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Model == "" {
		cfg.Model = DefaultModel
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if hc == nil {
		hc = &http.Client{}
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Client{cfg: cfg, hc: hc, log: log}, nil
}

// Model is the model the endpoint is asked for.
func (c *Client) Model() string { return c.cfg.Model }

// key returns the API key, read from APIKeyFile at each call so that a
// rotated key needs no restart.
func (c *Client) key() (string, error) {
	if c.cfg.APIKeyFile == "" {
		return strings.TrimSpace(c.cfg.APIKey), nil
	}
	b, err := os.ReadFile(c.cfg.APIKeyFile)
	if err != nil {
		return "", fmt.Errorf("read voice-api-key-file: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// CheckAudio refuses what no endpoint should be sent: nothing, too much,
// or a media type that is not audio (video/webm is what some browsers name
// an audio-only WebM recording, and is taken).
func CheckAudio(a Audio) error {
	if len(a.Data) == 0 {
		return fmt.Errorf("%w: the recording is empty", ErrUnsupported)
	}
	if len(a.Data) > MaxAudioBytes {
		return ErrTooLarge
	}
	mt, _, err := mime.ParseMediaType(a.MimeType)
	if err != nil {
		return fmt.Errorf("%w: media type %q: want audio/…, e.g. audio/webm", ErrUnsupported, a.MimeType)
	}
	if !strings.HasPrefix(mt, "audio/") && mt != "video/webm" && mt != "application/ogg" {
		return fmt.Errorf("%w: media type %s is not audio", ErrUnsupported, mt)
	}
	return nil
}

// extensions name the uploaded file: OpenAI's endpoint goes by the file
// name's extension.
var extensions = map[string]string{
	"audio/webm": "webm", "video/webm": "webm", "audio/ogg": "ogg", "application/ogg": "ogg",
	"audio/wav": "wav", "audio/x-wav": "wav", "audio/wave": "wav", "audio/mpeg": "mp3", "audio/mp3": "mp3",
	"audio/mp4": "m4a", "audio/m4a": "m4a", "audio/x-m4a": "m4a", "audio/aac": "m4a", "audio/flac": "flac",
}

// fileName is the upload's name for media type mt.
func fileName(mt string) string {
	base, _, _ := mime.ParseMediaType(mt)
	if ext, ok := extensions[base]; ok {
		return "audio." + ext
	}
	return "audio.webm"
}

// Transcribe sends a to the endpoint and returns its text.
func (c *Client) Transcribe(ctx context.Context, a Audio) (string, error) {
	if !c.cfg.Configured() {
		return "", ErrNotConfigured
	}
	if err := CheckAudio(a); err != nil {
		return "", err
	}
	key, err := c.key()
	if err != nil {
		return "", err
	}
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	fields := [][2]string{{"model", c.cfg.Model}, {"response_format", "json"}}
	if a.Language != "" {
		fields = append(fields, [2]string{"language", a.Language})
	}
	for _, f := range fields {
		if err := mw.WriteField(f[0], f[1]); err != nil {
			return "", fmt.Errorf("transcription form: %w", err)
		}
	}
	h := make(map[string][]string)
	h["Content-Disposition"] = []string{fmt.Sprintf(`form-data; name="file"; filename=%q`, fileName(a.MimeType))}
	h["Content-Type"] = []string{a.MimeType}
	part, err := mw.CreatePart(h)
	if err != nil {
		return "", fmt.Errorf("transcription form: %w", err)
	}
	if _, err := part.Write(a.Data); err != nil {
		return "", fmt.Errorf("transcription form: %w", err)
	}
	if err := mw.Close(); err != nil {
		return "", fmt.Errorf("transcription form: %w", err)
	}

	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.cfg.URL, &body)
	if err != nil {
		return "", fmt.Errorf("transcription request: %w", err)
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "betcode-agent")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	start := time.Now()
	res, err := c.hc.Do(req)
	if err != nil {
		msg := err.Error()
		var ue *url.Error
		if errors.As(err, &ue) {
			msg = ue.Err.Error() // without the URL
		}
		if errors.Is(err, context.DeadlineExceeded) {
			msg = fmt.Sprintf("no answer within %s", c.cfg.Timeout)
		}
		c.log.Warn("voice: the transcription endpoint was not reached", "endpoint", redact(c.cfg.URL), "err", msg)
		return "", &EndpointError{Message: msg}
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(res.Body, maxAnswer))
	if err != nil {
		return "", &EndpointError{Message: "reading its answer: " + err.Error()}
	}
	if res.StatusCode < 200 || res.StatusCode > 299 {
		e := &EndpointError{Status: res.StatusCode, Message: errorMessage(raw, res.Status)}
		c.log.Warn("voice: the transcription endpoint refused", "endpoint", redact(c.cfg.URL), "status", res.StatusCode, "err", e.Message)
		return "", e
	}
	var out struct {
		Text *string `json:"text"`
	}
	if err := json.Unmarshal(raw, &out); err != nil || out.Text == nil {
		return "", &EndpointError{Status: res.StatusCode, Message: "its answer is not {\"text\": …}"}
	}
	c.log.Debug("voice: transcribed", "bytes", len(a.Data), "mime", a.MimeType, "seconds", time.Since(start).Seconds())
	return strings.TrimSpace(*out.Text), nil
}

// errorMessage is an OpenAI error body's message, else the start of the
// body, else the HTTP status text.
func errorMessage(raw []byte, status string) string {
	var e struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(raw, &e) == nil && e.Error.Message != "" {
		return e.Error.Message
	}
	s := strings.TrimSpace(string(raw))
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	if s == "" {
		return status
	}
	return s
}
