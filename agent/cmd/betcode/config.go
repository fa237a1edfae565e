package main

import (
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/betcode-dev/betcode/agent/client"
	"github.com/betcode-dev/betcode/agent/config"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

func newConfigCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Read and change the agent's settings; list its MCP servers and permission rules",
		Long: `Read and change the agent's settings (docs/configuration.md) through
ConfigService, locally or through a relay. A change is stored in the agent's
settings file; hot settings apply at once, the others when the agent restarts.`,
	}
	cmd.AddCommand(newConfigGetCmd(g), newConfigSetCmd(g), newConfigMcpCmd(g), newConfigPermissionsCmd(g))
	return cmd
}

func newConfigGetCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "get [KEY]",
		Short: "Show every setting with its source, or one setting's value",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			conn, err := g.dial()
			if err != nil {
				return err
			}
			defer conn.Close()
			s, err := pb.NewConfigServiceClient(conn).GetSettings(cmd.Context(), &pb.GetSettingsRequest{Scope: pb.ConfigScope_CONFIG_SCOPE_USER})
			if err != nil {
				return fmt.Errorf("get settings: %w", err)
			}
			out := cmd.OutOrStdout()
			if len(args) == 1 {
				for _, v := range s.Values {
					if v.Key == args[0] {
						fmt.Fprintln(out, formatValue(v.Value))
						return nil
					}
				}
				return &client.ExitError{Code: client.ExitInvalidArgs, Err: fmt.Errorf("no setting %q (see docs/configuration.md)", args[0])}
			}
			w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "KEY\tVALUE\tSOURCE\tHOT\tNOTE")
			for _, v := range s.Values {
				note := ""
				if v.RestartPending {
					note = "changed; takes effect on restart"
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", v.Key, formatValue(v.Value), sourceName(v.Source), yesNo(v.Hot), note)
			}
			return w.Flush()
		},
	}
}

func newConfigSetCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "set KEY VALUE...",
		Short: "Change a setting (several values for a list, e.g. deny 'Bash(rm *)' 'Bash(curl *)')",
		Args:  cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			key, raw := args[0], args[1:]
			value, err := settingValue(key, raw)
			if err != nil {
				return &client.ExitError{Code: client.ExitInvalidArgs, Err: err}
			}
			extra, err := structpb.NewStruct(map[string]any{key: value})
			if err != nil {
				return err
			}
			conn, err := g.dial()
			if err != nil {
				return err
			}
			defer conn.Close()
			s, err := pb.NewConfigServiceClient(conn).UpdateSettings(cmd.Context(), &pb.UpdateSettingsRequest{
				Scope: pb.ConfigScope_CONFIG_SCOPE_USER, Settings: &pb.Settings{Extra: extra},
				UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"extra." + key}},
			})
			if err != nil {
				return fmt.Errorf("update settings: %w", err)
			}
			out := cmd.OutOrStdout()
			switch {
			case len(s.Overridden) > 0:
				fmt.Fprintf(out, "%s stored, but a flag or environment variable of the agent overrides it\n", key)
			case len(s.RestartRequired) > 0:
				fmt.Fprintf(out, "%s stored; it takes effect when the agent restarts\n", key)
			default:
				fmt.Fprintf(out, "%s set and in effect\n", key)
			}
			return nil
		},
	}
}

// settingValue turns command-line words into the JSON value of a key,
// validated as the agent will.
func settingValue(key string, words []string) (any, error) {
	k, ok := config.Lookup(key)
	if !ok {
		return nil, fmt.Errorf("no setting %q (see docs/configuration.md)", key)
	}
	var raw any
	switch k.Kind {
	case config.StringList:
		l := make([]any, len(words))
		for i, w := range words {
			l[i] = w
		}
		raw = l
	case config.Int, config.Uint:
		if len(words) != 1 {
			return nil, fmt.Errorf("%s takes one value", key)
		}
		n, err := strconv.ParseFloat(words[0], 64)
		if err != nil {
			return nil, fmt.Errorf("%s: want a number: %w", key, err)
		}
		raw = n
	default:
		if len(words) != 1 {
			return nil, fmt.Errorf("%s takes one value", key)
		}
		raw = words[0]
	}
	if _, err := config.Parse(key, raw); err != nil {
		return nil, err
	}
	return raw, nil
}

func newConfigMcpCmd(g *globals) *cobra.Command {
	var cwd string
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "List the MCP servers Claude Code would load (from its configuration files on the machine)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			conn, err := g.dial()
			if err != nil {
				return err
			}
			defer conn.Close()
			resp, err := pb.NewConfigServiceClient(conn).ListMcpServers(cmd.Context(), &pb.ListMcpServersRequest{WorkingDirectory: cwd})
			if err != nil {
				return fmt.Errorf("list MCP servers: %w", err)
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "NAME\tSCOPE\tTRANSPORT\tCOMMAND / URL\tSTATUS")
			for _, s := range resp.Servers {
				target := s.Url
				if target == "" {
					target = strings.TrimSpace(s.Command + " " + strings.Join(s.Args, " "))
				}
				st := strings.ToLower(strings.TrimPrefix(s.Status.String(), "MCP_SERVER_STATUS_"))
				if s.Status == pb.McpServerStatus_MCP_SERVER_STATUS_UNSPECIFIED {
					st = "-"
				}
				if s.Error != "" {
					st += ": " + s.Error
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", s.Name, strings.ToLower(strings.TrimPrefix(s.Scope.String(), "CONFIG_SCOPE_")),
					strings.ToLower(strings.TrimPrefix(s.Transport.String(), "MCP_TRANSPORT_")), target, st)
			}
			return w.Flush()
		},
	}
	cmd.Flags().StringVar(&cwd, "cwd", "", "project directory on the machine (absolute; default: user-scope servers only)")
	return cmd
}

func newConfigPermissionsCmd(g *globals) *cobra.Command {
	var cwd, session string
	cmd := &cobra.Command{
		Use:   "permissions",
		Short: "Show the permission rules in effect (the agent's, Claude Code's settings files, a session's grants)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			conn, err := g.dial()
			if err != nil {
				return err
			}
			defer conn.Close()
			r, err := pb.NewConfigServiceClient(conn).GetPermissions(cmd.Context(), &pb.GetPermissionsRequest{WorkingDirectory: cwd, SessionId: session})
			if err != nil {
				return fmt.Errorf("get permissions: %w", err)
			}
			out := cmd.OutOrStdout()
			for _, l := range []struct {
				name  string
				rules []string
			}{{"deny", r.Deny}, {"ask", r.Ask}, {"allow", r.Allow}} {
				for _, rule := range l.rules {
					fmt.Fprintf(out, "%-5s  %s\n", l.name, rule)
				}
			}
			if r.DefaultMode != "" {
				fmt.Fprintf(out, "default mode: %s\n", r.DefaultMode)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&cwd, "cwd", "", "project directory on the machine (absolute), to include its Claude Code settings")
	cmd.Flags().StringVar(&session, "session", "", "include this session's ALLOW_SESSION grants")
	return cmd
}

func formatValue(v *structpb.Value) string {
	if s, ok := v.GetKind().(*structpb.Value_StringValue); ok {
		return s.StringValue
	}
	b, err := protojson.Marshal(v)
	if err != nil {
		return v.String()
	}
	return string(b)
}

func sourceName(s pb.SettingSource) string {
	return strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(s.String(), "SETTING_SOURCE_"), "_", " "))
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
