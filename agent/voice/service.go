package voice

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"

	"github.com/betcode-dev/betcode/agent/server"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// BetCode error codes of VoiceService.
const (
	CodeNotConfigured       = "VOICE_NOT_CONFIGURED" // FAILED_PRECONDITION: no voice-transcribe-url
	CodeAudioTooLarge       = "AUDIO_TOO_LARGE"      // INVALID_ARGUMENT: over MaxAudioBytes
	CodeAudioUnsupported    = "AUDIO_UNSUPPORTED"    // INVALID_ARGUMENT: empty, not audio, or refused by the endpoint as such
	CodeTranscriptionFailed = "TRANSCRIPTION_FAILED" // UNAVAILABLE: the endpoint failed, refused the key or did not answer
)

// Transcriber is what the service needs of a Client.
type Transcriber interface {
	Transcribe(ctx context.Context, a Audio) (string, error)
	Model() string
}

var _ Transcriber = (*Client)(nil)

// Service is the VoiceService gRPC server.
type Service struct {
	pb.UnimplementedVoiceServiceServer
	t Transcriber
}

// NewService serves t (a Client logs its endpoint's failures itself).
func NewService(t Transcriber) *Service { return &Service{t: t} }

// Transcribe implements VoiceService.Transcribe.
func (s *Service) Transcribe(ctx context.Context, req *pb.TranscribeRequest) (*pb.TranscribeResponse, error) {
	text, err := s.t.Transcribe(ctx, Audio{Data: req.GetAudio(), MimeType: req.GetMimeType(), Language: req.GetLanguage()})
	if err != nil {
		return nil, Status(err)
	}
	return &pb.TranscribeResponse{Text: text, Model: s.t.Model()}, nil
}

// Status maps a Transcribe error to its gRPC status and BetCode code.
func Status(err error) error {
	var ee *EndpointError
	switch {
	case errors.Is(err, ErrNotConfigured):
		return server.Status(codes.FailedPrecondition, CodeNotConfigured, err.Error())
	case errors.Is(err, ErrTooLarge):
		return server.Status(codes.InvalidArgument, CodeAudioTooLarge, err.Error())
	case errors.Is(err, ErrUnsupported):
		return server.Status(codes.InvalidArgument, CodeAudioUnsupported, err.Error())
	case errors.As(err, &ee) && ee.BadAudio():
		return server.Status(codes.InvalidArgument, CodeAudioUnsupported, err.Error())
	case errors.As(err, &ee):
		return server.Status(codes.Unavailable, CodeTranscriptionFailed, err.Error())
	case errors.Is(err, context.Canceled):
		return server.Status(codes.Canceled, "", err.Error())
	}
	return server.Status(codes.Internal, CodeTranscriptionFailed, "voice: "+err.Error())
}
