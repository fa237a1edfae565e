package config

// Source is the layer a setting's value in effect comes from.
type Source int

// The layers, lowest precedence first.
const (
	SourceUnknown      Source = iota
	SourceDefault             // the built-in default
	SourceConfigFile          // the --config file
	SourceSettingsFile        // settings.json in the data directory
	SourceEnv                 // a BETCODE_* environment variable
	SourceFlag                // a command-line flag
)

// Overrides reports whether a value from s wins over the settings file, so
// that storing a new value there does not change the one in effect.
func (s Source) Overrides() bool { return s == SourceEnv || s == SourceFlag }

// Setting is one key's value in effect (of the key's Go type) and its
// source.
type Setting struct {
	Value  any
	Source Source
}

// Snapshot is the settings an agent started with.
type Snapshot struct {
	// Settings holds every key of Keys.
	Settings map[string]Setting
	// File is the settings file UpdateSettings writes; Stored its contents
	// at start.
	File   string
	Stored map[string]any
}
