// Package openaiapi is the OpenAI API provider: a provider with no CLI.
// The agent itself runs the turn loop against an OpenAI-compatible
// Responses endpoint (github.com/openai/openai-go), with a small tool set
// (read, write and patch files, list, search, run a command) executed in
// the session's working directory, every tool call decided by BetCode's
// permission engine. Its conversations are provider.Streams.
package openaiapi
