package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/betcode-dev/betcode/shared/buildinfo"
	"github.com/spf13/viper"
)

// version is set at build time with -ldflags "-X main.version=..."; see init.
var version = ""

// The version the build stamped, else the module version a go install
// recorded, else buildinfo.Dev.
func init() { version = buildinfo.Version(version) }

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "betcode-relay",
		Short:         "BetCode relay: machines dial out to it, clients reach them through it",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version,
	}
	root.AddCommand(newServeCmd(), newCertsCmd())
	root.AddCommand(newAdminCmd())
	root.AddCommand(newHealthcheckCmd())
	return root
}

// bindViper makes every flag settable as BETCODE_RELAY_<FLAG> and as a key
// of the --config file; the command line wins.
func bindViper(cmd *cobra.Command, v *viper.Viper) error {
	v.SetEnvPrefix("BETCODE_RELAY")
	v.SetEnvKeyReplacer(strings.NewReplacer("-", "_"))
	v.AutomaticEnv()
	if err := v.BindPFlags(cmd.Flags()); err != nil {
		return err
	}
	if f := v.GetString("config"); f != "" {
		v.SetConfigFile(f)
		if err := v.ReadInConfig(); err != nil {
			return fmt.Errorf("read --config %s: %w", f, err)
		}
	}
	return nil
}
