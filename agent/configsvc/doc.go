// Package configsvc serves ConfigService: the agent's own settings (read
// with their sources, changed with validation, stored in the settings file
// and applied at once where the running agent allows), Claude Code's MCP
// servers and settings files, and the permission rules in effect.
//
// The settings themselves (keys, defaults, validation, precedence) are
// defined in package config; Claude Code's files are read by package
// claudeconfig.
package configsvc
