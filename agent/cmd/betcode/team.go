package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// The `betcode team` commands show TeamService (docs/teams.md): the ccgrid
// view of a session's parallel work — its teammates and tasks — and the
// saved teammate and skill specs.

func newTeamCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "team",
		Short: "A session's teammates and tasks, and the saved teammate and skill specs (TeamService)",
		Long: `Show what works for a session: its teammates (the subagents spawned for it and
the ones Claude Code's Task tool started) and its tasks (its orchestrations'
steps and its own todo list), and manage the teammate specs and skill specs
that subagents can be given (betcode subagent spawn --teammate-spec ID).
Every command takes --json.`,
	}
	specs := &cobra.Command{Use: "specs", Short: "Saved teammate specs: list, create, delete"}
	specs.AddCommand(newTeamSpecsListCmd(g), newTeamSpecsCreateCmd(g), newTeamSpecsDeleteCmd(g))
	skills := &cobra.Command{Use: "skills", Short: "Saved skill specs: list, create, delete"}
	skills.AddCommand(newTeamSkillsListCmd(g), newTeamSkillsCreateCmd(g), newTeamSkillsDeleteCmd(g))
	cmd.AddCommand(newTeamTeammatesCmd(g), newTeamTasksCmd(g), specs, skills)
	return cmd
}

// teamCall is call with a TeamService client.
func teamCall(cmd *cobra.Command, g *globals, what string, fn func(context.Context, pb.TeamServiceClient) error) error {
	return call(cmd, g, what, func(ctx context.Context, conn *grpc.ClientConn) error {
		return fn(ctx, pb.NewTeamServiceClient(conn))
	})
}

func newTeamTeammatesCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "teammates SESSION_ID",
		Short: "List a session's teammates, oldest first: status, kind, step, cost and latest output",
		Args:  oneArg("the session id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return teamCall(cmd, g, "list teammates", func(ctx context.Context, c pb.TeamServiceClient) error {
				resp, err := c.ListTeammates(ctx, &pb.ListTeammatesRequest{SessionId: args[0]})
				if err != nil {
					return err
				}
				if asJSON {
					return printJSON(cmd.OutOrStdout(), resp)
				}
				return printTeammates(cmd.OutOrStdout(), resp.GetTeammates())
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the list as one JSON object")
	return cmd
}

func newTeamTasksCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "tasks SESSION_ID",
		Short: "List a session's tasks: its orchestrations' steps, then its own todo list",
		Args:  oneArg("the session id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return teamCall(cmd, g, "list tasks", func(ctx context.Context, c pb.TeamServiceClient) error {
				resp, err := c.ListTasks(ctx, &pb.ListTasksRequest{SessionId: args[0]})
				if err != nil {
					return err
				}
				if asJSON {
					return printJSON(cmd.OutOrStdout(), resp)
				}
				return printTasks(cmd.OutOrStdout(), resp.GetTasks())
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the list as one JSON object")
	return cmd
}

func newTeamSpecsListCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the saved teammate specs, by name",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return teamCall(cmd, g, "list teammate specs", func(ctx context.Context, c pb.TeamServiceClient) error {
				resp, err := c.ListTeammateSpecs(ctx, &pb.ListTeammateSpecsRequest{})
				if err != nil {
					return err
				}
				if asJSON {
					return printJSON(cmd.OutOrStdout(), resp)
				}
				return printTeammateSpecs(cmd.OutOrStdout(), resp.GetSpecs())
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the list as one JSON object")
	return cmd
}

// readText is text, or the content of file ("-": standard input) when
// file is set; flag names the file flag in errors.
func readText(cmd *cobra.Command, text, file, flag string) (string, error) {
	if file == "" {
		return text, nil
	}
	var b []byte
	var err error
	if file == "-" {
		b, err = io.ReadAll(cmd.InOrStdin())
	} else {
		b, err = os.ReadFile(file)
	}
	if err != nil {
		return "", usageError("--%s: %w", flag, err)
	}
	return string(b), nil
}

func newTeamSpecsCreateCmd(g *globals) *cobra.Command {
	var spec pb.TeammateSpec
	var instructionsFile string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "create --name NAME [--role ROLE] [--instructions TEXT | --instructions-file FILE] [--skill ID]... [--model M]",
		Short: "Save a teammate spec; prints its id (use it with betcode subagent spawn --teammate-spec ID)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFlags(cmd, []string{"name"}, "instructions", "instructions-file"); err != nil {
				return err
			}
			if strings.TrimSpace(spec.Name) == "" {
				return usageError("--name is empty: a teammate spec needs a unique name, e.g. researcher")
			}
			var err error
			if spec.Instructions, err = readText(cmd, spec.Instructions, instructionsFile, "instructions-file"); err != nil {
				return err
			}
			return teamCall(cmd, g, "create teammate spec", func(ctx context.Context, c pb.TeamServiceClient) error {
				resp, err := c.CreateTeammateSpec(ctx, &pb.CreateTeammateSpecRequest{Spec: &spec})
				if err != nil {
					return err
				}
				if asJSON {
					return printJSON(cmd.OutOrStdout(), resp.GetSpec())
				}
				fmt.Fprintln(cmd.OutOrStdout(), resp.GetSpec().GetId())
				fmt.Fprintf(cmd.ErrOrStderr(), "saved teammate spec %q; give it to a subagent with betcode subagent spawn --teammate-spec %s\n",
					resp.GetSpec().GetName(), resp.GetSpec().GetId())
				return nil
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&spec.Name, "name", "", "unique name, e.g. researcher (required)")
	f.StringVar(&spec.Role, "role", "", "role, e.g. 'Research specialist'")
	f.StringVar(&spec.Instructions, "instructions", "", "instructions given before the prompt")
	f.StringVar(&instructionsFile, "instructions-file", "", "read the instructions from this file (- for standard input)")
	f.StringArrayVar(&spec.SkillIds, "skill", nil, "skill spec id whose content the teammate gets (repeatable; betcode team skills list)")
	f.StringVar(&spec.Model, "model", "", "model (default: the parent session's)")
	f.BoolVar(&asJSON, "json", false, "print the saved spec as one JSON object")
	return cmd
}

func newTeamSpecsDeleteCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "delete SPEC_ID",
		Short: "Delete a teammate spec",
		Args:  oneArg("the spec id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return teamCall(cmd, g, "delete teammate spec", func(ctx context.Context, c pb.TeamServiceClient) error {
				resp, err := c.DeleteTeammateSpec(ctx, &pb.DeleteTeammateSpecRequest{Id: args[0]})
				if err != nil {
					return err
				}
				if asJSON {
					return printJSON(cmd.OutOrStdout(), resp)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "deleted teammate spec %s\n", args[0])
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the response as one JSON object")
	return cmd
}

func newTeamSkillsListCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the saved skill specs, by name",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return teamCall(cmd, g, "list skill specs", func(ctx context.Context, c pb.TeamServiceClient) error {
				resp, err := c.ListSkillSpecs(ctx, &pb.ListSkillSpecsRequest{})
				if err != nil {
					return err
				}
				if asJSON {
					return printJSON(cmd.OutOrStdout(), resp)
				}
				return printSkillSpecs(cmd.OutOrStdout(), resp.GetSpecs())
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the list as one JSON object")
	return cmd
}

// parseSkillType parses internal, official or external.
func parseSkillType(s string) (pb.SkillType, error) {
	v, ok := pb.SkillType_value["SKILL_TYPE_"+strings.ToUpper(strings.TrimPrefix(strings.ToLower(strings.TrimSpace(s)), "skill_type_"))]
	if !ok || v == 0 {
		return 0, usageError("--type %q: want internal, official or external", s)
	}
	return pb.SkillType(v), nil
}

func newTeamSkillsCreateCmd(g *globals) *cobra.Command {
	var spec pb.SkillSpec
	var typ, file string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "create --name NAME [--type internal|official|external] [--file SKILL.md] [--description TEXT]",
		Short: "Save a skill spec; prints its id (name it in a teammate spec with --skill ID)",
		Long: `Save a skill spec. An internal skill (the default) is your own: --file gives its
SKILL.md content (at most 64 KiB; - reads standard input). An official skill
is one built into Claude, an external one comes from a plugin (--plugin).`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFlags(cmd, []string{"name"}); err != nil {
				return err
			}
			if strings.TrimSpace(spec.Name) == "" {
				return usageError("--name is empty: a skill spec needs a unique name, e.g. db-query")
			}
			var err error
			if spec.SkillType, err = parseSkillType(typ); err != nil {
				return err
			}
			if spec.SkillMdContent, err = readText(cmd, "", file, "file"); err != nil {
				return err
			}
			if spec.SkillType == pb.SkillType_SKILL_TYPE_INTERNAL && strings.TrimSpace(spec.SkillMdContent) == "" {
				return usageError("an internal skill needs its SKILL.md: --file PATH (or --type official|external)")
			}
			return teamCall(cmd, g, "create skill spec", func(ctx context.Context, c pb.TeamServiceClient) error {
				resp, err := c.CreateSkillSpec(ctx, &pb.CreateSkillSpecRequest{Spec: &spec})
				if err != nil {
					return err
				}
				if asJSON {
					return printJSON(cmd.OutOrStdout(), resp.GetSpec())
				}
				fmt.Fprintln(cmd.OutOrStdout(), resp.GetSpec().GetId())
				fmt.Fprintf(cmd.ErrOrStderr(), "saved skill spec %q; give it to a teammate spec with betcode team specs create --skill %s\n",
					resp.GetSpec().GetName(), resp.GetSpec().GetId())
				return nil
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&spec.Name, "name", "", "unique name, e.g. db-query (required)")
	f.StringVar(&spec.Description, "description", "", "what the skill does")
	f.StringVar(&typ, "type", "internal", "internal (your SKILL.md), official (built into Claude) or external (from a plugin)")
	f.StringVar(&file, "file", "", "the SKILL.md content of an internal skill (- for standard input)")
	f.StringVar(&spec.PluginName, "plugin", "", "plugin of an external skill")
	f.StringVar(&spec.AllowedTools, "allowed-tools", "", "tools the skill may use, comma-separated")
	f.StringVar(&spec.ArgumentHint, "argument-hint", "", "hint at the skill's arguments")
	f.BoolVar(&asJSON, "json", false, "print the saved spec as one JSON object")
	return cmd
}

func newTeamSkillsDeleteCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "delete SKILL_ID",
		Short: "Delete a skill spec (refused while a teammate spec names it)",
		Args:  oneArg("the skill id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return teamCall(cmd, g, "delete skill spec", func(ctx context.Context, c pb.TeamServiceClient) error {
				resp, err := c.DeleteSkillSpec(ctx, &pb.DeleteSkillSpecRequest{Id: args[0]})
				if err != nil {
					return err
				}
				if asJSON {
					return printJSON(cmd.OutOrStdout(), resp)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "deleted skill spec %s\n", args[0])
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the response as one JSON object")
	return cmd
}
