package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

func newWorktreeCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "worktree",
		Short: "Manage git worktrees on the machine, to run sessions side by side on separate branches",
	}
	cmd.AddCommand(newWorktreeListCmd(g), newWorktreeCreateCmd(g), newWorktreeSwitchCmd(g), newWorktreeRemoveCmd(g))
	return cmd
}

// repoArg is --repo, or this directory (meaningful for an agent on this
// machine; through a relay name the machine's path).
func repoArg(repo string) (string, error) {
	if repo != "" {
		return repo, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("current directory: %w", err)
	}
	return filepath.Abs(wd)
}

func newWorktreeListCmd(g *globals) *cobra.Command {
	var repo string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List a repository's worktrees with their ids",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			path, err := repoArg(repo)
			if err != nil {
				return err
			}
			conn, err := g.dial()
			if err != nil {
				return err
			}
			defer conn.Close()
			resp, err := pb.NewWorktreeServiceClient(conn).ListWorktrees(cmd.Context(), &pb.ListWorktreesRequest{RepoPath: path})
			if err != nil {
				return fmt.Errorf("list worktrees: %w", err)
			}
			return printWorktrees(cmd.OutOrStdout(), resp.Worktrees)
		},
	}
	cmd.Flags().StringVar(&repo, "repo", "", "a directory of the repository on the machine (default: the current directory)")
	return cmd
}

// printWorktrees writes one line per worktree.
func printWorktrees(out io.Writer, list []*pb.WorktreeInfo) error {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tNAME\tBRANCH\tSTATE\tSESSION\tPATH")
	for _, wt := range list {
		branch := wt.Branch
		if wt.Detached {
			branch = "(detached " + short(wt.Head) + ")"
		}
		state := "-"
		switch {
		case wt.IsMain:
			state = "main"
		case wt.Locked && wt.LockReason != "":
			state = "locked: " + wt.LockReason
		case wt.Locked:
			state = "locked"
		case wt.Prunable:
			state = "missing"
		}
		sess := wt.ActiveSessionId
		if sess == "" {
			sess = "-"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", wt.Id, wt.Name, branch, state, sess, wt.Path)
	}
	return w.Flush()
}

func short(hash string) string {
	if len(hash) > 8 {
		return hash[:8]
	}
	return hash
}

func newWorktreeCreateCmd(g *globals) *cobra.Command {
	var repo, name, path string
	var newBranch bool
	cmd := &cobra.Command{
		Use:   "create BRANCH",
		Short: "Add a worktree for BRANCH (with -b, a new branch at HEAD), beside the repository by default",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			rp, err := repoArg(repo)
			if err != nil {
				return err
			}
			conn, err := g.dial()
			if err != nil {
				return err
			}
			defer conn.Close()
			start := time.Now()
			wt, err := pb.NewWorktreeServiceClient(conn).CreateWorktree(cmd.Context(), &pb.CreateWorktreeRequest{
				RepoPath: rp, Branch: args[0], Name: name, Path: path, CreateBranch: newBranch,
			})
			if err != nil {
				return fmt.Errorf("create worktree: %w", err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s\t%s\n", wt.Id, wt.Path)
			fmt.Fprintf(cmd.ErrOrStderr(), "created worktree %q on branch %s in %s; start a session in it with betcode chat --worktree %s\n",
				wt.Name, wt.Branch, time.Since(start).Round(time.Millisecond), wt.Id)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&repo, "repo", "", "a directory of the repository on the machine (default: the current directory)")
	f.StringVar(&name, "name", "", "display name and directory name (default: the branch)")
	f.StringVar(&path, "path", "", "absolute path of the new worktree (default: <repo>.worktrees/<name> beside the repository)")
	f.BoolVarP(&newBranch, "new-branch", "b", false, "create BRANCH at the repository's HEAD")
	return cmd
}

func newWorktreeSwitchCmd(g *globals) *cobra.Command {
	var sessionID string
	cmd := &cobra.Command{
		Use:   "switch ID --session SESSION_ID",
		Short: "Move a session to worktree ID: its next turn runs there",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			conn, err := g.dial()
			if err != nil {
				return err
			}
			defer conn.Close()
			resp, err := pb.NewWorktreeServiceClient(conn).SwitchWorktree(cmd.Context(), &pb.SwitchWorktreeRequest{
				WorktreeId: args[0], SessionId: sessionID,
			})
			if err != nil {
				return fmt.Errorf("switch worktree: %w", err)
			}
			prev := resp.PreviousWorktreeId
			if prev == "" {
				prev = "no worktree"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "session %s now in %s (%s); previously %s (%s)\n", sessionID,
				resp.Worktree.GetId(), resp.Worktree.GetPath(), prev, resp.PreviousWorkingDirectory)
			return nil
		},
	}
	cmd.Flags().StringVar(&sessionID, "session", "", "the session to move (required)")
	_ = cmd.MarkFlagRequired("session")
	return cmd
}

func newWorktreeRemoveCmd(g *globals) *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "remove ID",
		Short: "Remove worktree ID (its branch stays); --force also with changes or sessions, which are closed",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			conn, err := g.dial()
			if err != nil {
				return err
			}
			defer conn.Close()
			resp, err := pb.NewWorktreeServiceClient(conn).RemoveWorktree(cmd.Context(), &pb.RemoveWorktreeRequest{
				WorktreeId: args[0], Force: force,
			})
			if err != nil {
				return fmt.Errorf("remove worktree: %w", err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "removed %s; %d session(s) closed\n", args[0], resp.SessionsClosed)
			return nil
		},
	}
	cmd.Flags().BoolVarP(&force, "force", "f", false, "remove even with uncommitted changes or sessions (closing them)")
	return cmd
}
