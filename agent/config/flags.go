package config

import (
	"fmt"
	"time"

	"github.com/spf13/pflag"
)

// RegisterFlags adds a flag for every key that has one. machine holds the
// defaults that depend on the machine (e.g. "data-dir"), shown by --help and
// used when nothing else sets them.
func RegisterFlags(fs *pflag.FlagSet, machine map[string]any) {
	for _, k := range Keys {
		if k.NoFlag {
			continue
		}
		def := k.DefaultValue()
		if m, ok := machine[k.Name]; ok {
			def = m
		}
		switch k.Kind {
		case String:
			fs.String(k.Name, def.(string), k.Usage)
		case StringList:
			fs.StringSlice(k.Name, def.([]string), k.Usage)
		case Duration:
			fs.Duration(k.Name, def.(time.Duration), k.Usage)
		case Int:
			fs.Int(k.Name, def.(int), k.Usage)
		case Uint:
			fs.Uint64(k.Name, def.(uint64), k.Usage)
		case Bool:
			fs.Bool(k.Name, def.(bool), k.Usage)
		default:
			panic(fmt.Sprintf("config: key %s of kind %v cannot be a flag", k.Name, k.Kind))
		}
	}
}
