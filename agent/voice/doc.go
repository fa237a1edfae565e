// Package voice serves VoiceService: a paired device's dictated audio
// transcribed on the user's own machine with the endpoint the machine is
// configured with, an OpenAI-compatible POST /v1/audio/transcriptions
// (multipart form: file, model, optional language; answer {"text": ...}).
//
// The audio reaches the machine inside the device's end-to-end channel
// (the web app's POST /api/voice/transcriptions as a web/1 request) or on
// the agent's own listeners; the agent never serves VoiceService to a call
// the relay forwards in clear (localtoken.Guard), so the relay carries only
// ciphertext. The machine then sends it to its endpoint, which the user
// chose (a local Whisper server, or a provider whose key the user holds).
//
// Failures are gRPC statuses with BetCode error codes at the service
// (service.go): no endpoint configured FAILED_PRECONDITION /
// VOICE_NOT_CONFIGURED; too much audio INVALID_ARGUMENT / AUDIO_TOO_LARGE;
// empty audio or a type that is not audio INVALID_ARGUMENT /
// AUDIO_UNSUPPORTED; the endpoint refusing, failing or not answering in
// time UNAVAILABLE / TRANSCRIPTION_FAILED (INVALID_ARGUMENT when it said
// the audio itself was bad). The API key is sent only to the endpoint and
// never logged.
package voice
