// Package config defines the agent daemon's settings once: each key's type,
// default, environment variable, flag, whether a running agent can apply a
// change without a restart, and its validation. cmd/betcode-agent
// registers its flags from this table, ConfigService reads and writes the
// settings through it, and docs/configuration.md is rendered from it (a
// test fails when the checked-in page differs: regenerate it with
// `go generate ./agent/config`).
//
// Precedence, highest first: command-line flags, BETCODE_* environment
// variables, the settings file ConfigService writes (<data-dir>/settings.json),
// the --config file, the defaults. The package holds no viper: cmd/ fills
// the layers.
package config

//go:generate go run ./gendocs -o ../../docs/configuration.md
