package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/viper"

	"github.com/betcode-dev/betcode/shared/buildinfo"
)

// version is set at build time with -ldflags "-X main.version=...".
var version string

// The version the build stamped, else the module version a go install
// recorded, else buildinfo.Dev.
func init() { version = buildinfo.Version(version) }

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "betcode-agent",
		Short:         "BetCode agent: drive Claude Code on this machine over gRPC",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version,
	}
	root.AddCommand(newServeCmd(), newEnrollCmd(), newInstallServiceCmd(), newPairCmd(), newDevicesCmd(), newUpdateCmd())
	return root
}

// bindViper makes every flag of cmd settable as BETCODE_<FLAG> in the
// environment and as a key of the --config file; flags given on the command
// line win.
func bindViper(cmd *cobra.Command, v *viper.Viper) error {
	v.SetEnvPrefix("BETCODE")
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
