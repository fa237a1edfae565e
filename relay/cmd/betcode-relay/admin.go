package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/viper"
	"google.golang.org/grpc/status"

	"github.com/betcode-dev/betcode/relay/admin"
	"github.com/betcode-dev/betcode/relay/server"
	"github.com/betcode-dev/betcode/relay/store"
)

// sqliteFile is the store's file in --data-dir (server.OpenStore).
const sqliteFile = "relay.db"

// adminCLI is the state the admin subcommands share.
type adminCLI struct {
	v *viper.Viper
}

func newAdminCmd() *cobra.Command {
	a := &adminCLI{v: viper.New()}
	cmd := &cobra.Command{
		Use:   "admin",
		Short: "Manage users, teams, tokens, machines and the audit log in the relay's store",
		Long: `Manage the relay's accounts directly in its store, with every right: whoever
holds the database holds everything. Point it at the store the relay uses:
--database-url (PostgreSQL) or --data-dir (SQLite), also settable as
BETCODE_RELAY_DATABASE_URL / BETCODE_RELAY_DATA_DIR or keys of --config.
Remote administrators do the same through the relay's AdminService.
docs/admin.md describes the roles and every command.`,
	}
	pf := cmd.PersistentFlags()
	pf.String("data-dir", "./relay-data", "the relay's data directory (SQLite store; used when --database-url is empty)")
	pf.String("database-url", "", "the relay's PostgreSQL URL")
	pf.String("config", "", "config file (the relay's: database-url and data-dir are read from it)")
	cmd.AddCommand(a.userCmd(), a.teamCmd(), a.tokenCmd(), a.enrollTokenCmd(), a.machineCmd(), a.auditCmd())
	return cmd
}

// run returns a RunE that opens the store, calls fn with Ops acting as the
// CLI, and closes the store. create allows making a new SQLite store (for
// the first user); any other command refuses a missing one, which is most
// likely a wrong --data-dir.
func (a *adminCLI) run(create bool, fn func(ctx context.Context, cmd *cobra.Command, args []string, ops *admin.Ops) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) (err error) {
		if err := bindViper(cmd, a.v); err != nil {
			return err
		}
		log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelWarn}))
		st, err := a.openStore(cmd, create, log)
		if err != nil {
			return err
		}
		defer func() {
			if cerr := st.Close(); cerr != nil && err == nil {
				err = fmt.Errorf("close relay store: %w", cerr)
			}
		}()
		return cliError(fn(cmd.Context(), cmd, args, &admin.Ops{Store: st, Log: log}))
	}
}

func (a *adminCLI) openStore(cmd *cobra.Command, create bool, log *slog.Logger) (store.Store, error) {
	url, dir := a.v.GetString("database-url"), a.v.GetString("data-dir")
	if url == "" {
		if dir == "" {
			return nil, errors.New("no relay store: set --data-dir or --database-url")
		}
		path := filepath.Join(dir, sqliteFile)
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			if !create {
				return nil, fmt.Errorf("no relay store at %s: point --data-dir (BETCODE_RELAY_DATA_DIR) at the relay's data directory or --database-url at its PostgreSQL; `betcode-relay admin user create` makes a new store", path)
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "creating a new relay store at %s\n", path)
		}
	}
	st, err := server.OpenStore(cmd.Context(), url, dir, log)
	if err != nil {
		if url != "" {
			return nil, fmt.Errorf("open relay store at --database-url: %w", err)
		}
		return nil, fmt.Errorf("open relay store in %s: %w", dir, err)
	}
	return st, nil
}

// cliError turns an admin.Ops status into its message: the CLI shows what
// the API would, without the gRPC wrapping.
func cliError(err error) error {
	if err == nil {
		return nil
	}
	if st, ok := status.FromError(err); ok {
		return errors.New(st.Message())
	}
	return err
}

func (a *adminCLI) userCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "user", Short: "Create, list, disable and enable users"}
	var email string
	var isAdmin, enable, asJSON bool
	create := &cobra.Command{
		Use:   "create NAME",
		Short: "Create a user (1-64 of a-z 0-9 . _ - @)",
		Args:  cobra.ExactArgs(1),
		RunE: a.run(true, func(ctx context.Context, cmd *cobra.Command, args []string, ops *admin.Ops) error {
			u, err := ops.CreateUser(ctx, admin.CLI(), store.User{ID: args[0], Email: email, Admin: isAdmin})
			if err != nil {
				return err
			}
			what := "user"
			if u.Admin {
				what = "relay administrator"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "created %s %s\n", what, u.ID)
			return nil
		}),
	}
	create.Flags().StringVar(&email, "email", "", "the user's email address")
	create.Flags().BoolVar(&isAdmin, "admin", false, "make the user a relay administrator")
	list := &cobra.Command{
		Use:   "list",
		Short: "List users",
		Args:  cobra.NoArgs,
		RunE: a.run(false, func(ctx context.Context, cmd *cobra.Command, _ []string, ops *admin.Ops) error {
			us, err := ops.ListUsers(ctx, admin.CLI())
			if err != nil {
				return err
			}
			if asJSON {
				out := make([]userJSON, 0, len(us))
				for _, u := range us {
					out = append(out, userJSON{ID: u.ID, Email: u.Email, Admin: u.Admin, Disabled: u.Disabled, CreatedAt: tp(u.CreatedAt)})
				}
				return writeJSON(cmd.OutOrStdout(), out)
			}
			return table(cmd.OutOrStdout(), []string{"USER", "EMAIL", "ADMIN", "DISABLED", "CREATED"}, func(row func(...any)) {
				for _, u := range us {
					row(u.ID, dash(u.Email), yes(u.Admin), yes(u.Disabled), when(u.CreatedAt))
				}
			})
		}),
	}
	jsonFlag(list, &asJSON)
	disable := &cobra.Command{
		Use:   "disable NAME",
		Short: "Disable a user: their tokens stop working at once (--enable undoes it)",
		Args:  cobra.ExactArgs(1),
		RunE: a.run(false, func(ctx context.Context, cmd *cobra.Command, args []string, ops *admin.Ops) error {
			u, err := ops.DisableUser(ctx, admin.CLI(), args[0], !enable)
			if err != nil {
				return err
			}
			state := "disabled"
			if !u.Disabled {
				state = "enabled"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "user %s is %s\n", u.ID, state)
			return nil
		}),
	}
	disable.Flags().BoolVar(&enable, "enable", false, "enable the user again")
	cmd.AddCommand(create, list, disable)
	return cmd
}

func (a *adminCLI) teamCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "team", Short: "Create and list teams, add and remove members"}
	var owner, role string
	var asJSON bool
	create := &cobra.Command{
		Use:   "create NAME",
		Short: "Create a team (1-64 of a-z 0-9 . _ -) with its first owner",
		Args:  cobra.ExactArgs(1),
		RunE: a.run(false, func(ctx context.Context, cmd *cobra.Command, args []string, ops *admin.Ops) error {
			t, err := ops.CreateTeam(ctx, admin.CLI(), args[0], owner)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "created team %s, owned by %s\n", t.ID, owner)
			return nil
		}),
	}
	create.Flags().StringVar(&owner, "owner", "", "the team's first owner (a user)")
	_ = create.MarkFlagRequired("owner")
	list := &cobra.Command{
		Use:   "list",
		Short: "List teams and their members",
		Args:  cobra.NoArgs,
		RunE: a.run(false, func(ctx context.Context, cmd *cobra.Command, _ []string, ops *admin.Ops) error {
			teams, err := ops.ListTeams(ctx, admin.CLI())
			if err != nil {
				return err
			}
			if asJSON {
				out := make([]teamJSON, 0, len(teams))
				for _, t := range teams {
					tj := teamJSON{ID: t.ID, CreatedAt: tp(t.CreatedAt), Members: []memberJSON{}}
					for _, m := range t.Members {
						tj.Members = append(tj.Members, memberJSON{UserID: m.UserID, Role: string(m.Role)})
					}
					out = append(out, tj)
				}
				return writeJSON(cmd.OutOrStdout(), out)
			}
			return table(cmd.OutOrStdout(), []string{"TEAM", "CREATED", "MEMBERS"}, func(row func(...any)) {
				for _, t := range teams {
					ms := make([]string, 0, len(t.Members))
					for _, m := range t.Members {
						ms = append(ms, fmt.Sprintf("%s (%s)", m.UserID, m.Role))
					}
					row(t.ID, when(t.CreatedAt), dash(strings.Join(ms, ", ")))
				}
			})
		}),
	}
	jsonFlag(list, &asJSON)
	add := &cobra.Command{
		Use:   "add-member TEAM USER",
		Short: "Add a user to a team, or change their role",
		Args:  cobra.ExactArgs(2),
		RunE: a.run(false, func(ctx context.Context, cmd *cobra.Command, args []string, ops *admin.Ops) error {
			m, err := ops.AddMember(ctx, admin.CLI(), args[0], args[1], store.Role(role))
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s is %s of team %s\n", m.UserID, article(m.Role), m.TeamID)
			return nil
		}),
	}
	add.Flags().StringVar(&role, "role", string(store.RoleMember), "member, admin or owner")
	remove := &cobra.Command{
		Use:   "remove-member TEAM USER",
		Short: "Remove a user from a team (a team keeps at least one owner)",
		Args:  cobra.ExactArgs(2),
		RunE: a.run(false, func(ctx context.Context, cmd *cobra.Command, args []string, ops *admin.Ops) error {
			if err := ops.RemoveMember(ctx, admin.CLI(), args[0], args[1]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "removed %s from team %s\n", args[1], args[0])
			return nil
		}),
	}
	cmd.AddCommand(create, list, add, remove)
	return cmd
}

func (a *adminCLI) tokenCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "token", Short: "Create, list and revoke client tokens"}
	var user, name string
	var ttl time.Duration
	var asJSON bool
	create := &cobra.Command{
		Use:   "create",
		Short: "Create a client token for a user; it is printed once",
		Args:  cobra.NoArgs,
		RunE: a.run(false, func(ctx context.Context, cmd *cobra.Command, _ []string, ops *admin.Ops) error {
			secret, t, err := ops.CreateToken(ctx, admin.CLI(), user, name, ttl)
			if err != nil {
				return err
			}
			printSecret(cmd, secret, fmt.Sprintf("client token %s for %s, expires %s", t.ID, t.UserID, when(t.ExpiresAt)))
			return nil
		}),
	}
	create.Flags().StringVar(&user, "user", "", "the token's user")
	create.Flags().StringVar(&name, "name", "", `a name to recognise it by, e.g. "laptop"`)
	create.Flags().DurationVar(&ttl, "ttl", admin.DefaultTokenTTL, "lifetime, at most 8760h")
	_ = create.MarkFlagRequired("user")
	list := &cobra.Command{
		Use:   "list",
		Short: "List client tokens (never their secrets), newest first",
		Args:  cobra.NoArgs,
		RunE: a.run(false, func(ctx context.Context, cmd *cobra.Command, _ []string, ops *admin.Ops) error {
			toks, err := ops.ListTokens(ctx, admin.CLI(), user)
			if err != nil {
				return err
			}
			now := time.Now()
			if asJSON {
				out := make([]tokenJSON, 0, len(toks))
				for _, t := range toks {
					out = append(out, tokenJSON{
						ID: t.ID, UserID: t.UserID, Name: t.Name, State: tokenState(&t, now), CreatedAt: tp(t.CreatedAt), ExpiresAt: tp(t.ExpiresAt),
						LastUsedAt: tp(t.LastUsedAt), LastUsedAddr: t.LastUsedAddr, RevokedAt: tp(t.RevokedAt),
						Scope: t.Scope, MachineID: t.MachineID,
					})
				}
				return writeJSON(cmd.OutOrStdout(), out)
			}
			return table(cmd.OutOrStdout(), []string{"ID", "USER", "NAME", "SCOPE", "STATE", "CREATED", "EXPIRES", "LAST USED"}, func(row func(...any)) {
				for _, t := range toks {
					used := when(t.LastUsedAt)
					if t.LastUsedAddr != "" {
						used += " from " + t.LastUsedAddr
					}
					row(t.ID, t.UserID, dash(t.Name), tokenScope(&t), tokenState(&t, now), when(t.CreatedAt), when(t.ExpiresAt), used)
				}
			})
		}),
	}
	list.Flags().StringVar(&user, "user", "", "only this user's tokens (default: everyone's)")
	jsonFlag(list, &asJSON)
	revoke := &cobra.Command{
		Use:   "revoke ID",
		Short: "Revoke a client token: every relay replica refuses it within a second",
		Args:  cobra.ExactArgs(1),
		RunE: a.run(false, func(ctx context.Context, cmd *cobra.Command, args []string, ops *admin.Ops) error {
			t, err := ops.RevokeToken(ctx, admin.CLI(), args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "revoked token %s of %s (at %s)\n", t.ID, t.UserID, when(t.RevokedAt))
			return nil
		}),
	}
	cmd.AddCommand(create, list, revoke)
	return cmd
}

func (a *adminCLI) enrollTokenCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "enroll-token", Short: "Create single-use join tokens that enroll a machine"}
	var team, user string
	var ttl time.Duration
	create := &cobra.Command{
		Use:   "create (--team TEAM | --user USER)",
		Short: "Create a join token for a team's machine or a user's; it is printed once",
		Args:  cobra.NoArgs,
		RunE: a.run(false, func(ctx context.Context, cmd *cobra.Command, _ []string, ops *admin.Ops) error {
			secret, t, err := ops.CreateEnrollToken(ctx, admin.CLI(), team, user, ttl)
			if err != nil {
				return err
			}
			owner := "user " + t.UserID
			if t.TeamID != "" {
				owner = "team " + t.TeamID
			}
			printSecret(cmd, secret, fmt.Sprintf("single-use join token %s for a machine of %s, expires %s", t.ID, owner, when(t.ExpiresAt)))
			return nil
		}),
	}
	create.Flags().StringVar(&team, "team", "", "the team that will own the machine")
	create.Flags().StringVar(&user, "user", "", "the user who will own the machine")
	create.Flags().DurationVar(&ttl, "ttl", admin.DefaultJoinTTL, "lifetime, at most 24h")
	create.MarkFlagsMutuallyExclusive("team", "user")
	create.MarkFlagsOneRequired("team", "user")
	cmd.AddCommand(create)
	return cmd
}

func (a *adminCLI) machineCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "machine", Short: "List, revoke and delete machines"}
	var asJSON bool
	list := &cobra.Command{
		Use:   "list",
		Short: "List every machine, revoked ones too",
		Args:  cobra.NoArgs,
		RunE: a.run(false, func(ctx context.Context, cmd *cobra.Command, _ []string, ops *admin.Ops) error {
			ms, err := ops.ListMachines(ctx, admin.CLI())
			if err != nil {
				return err
			}
			if asJSON {
				out := make([]machineJSON, 0, len(ms))
				for _, m := range ms {
					out = append(out, machineJSON{
						ID: m.ID, Name: m.Name, OwnerUserID: m.OwnerID, TeamID: m.TeamID, Hostname: m.Hostname,
						RegisteredAt: tp(m.RegisteredAt), LastSeen: tp(m.LastSeen), RevokedAt: tp(m.RevokedAt),
					})
				}
				return writeJSON(cmd.OutOrStdout(), out)
			}
			return table(cmd.OutOrStdout(), []string{"ID", "NAME", "OWNER", "TEAM", "LAST SEEN", "REVOKED"}, func(row func(...any)) {
				for _, m := range ms {
					row(m.ID, dash(m.Name), dash(m.OwnerID), dash(m.TeamID), when(m.LastSeen), when(m.RevokedAt))
				}
			})
		}),
	}
	jsonFlag(list, &asJSON)
	revoke := &cobra.Command{
		Use:   "revoke ID",
		Short: "Revoke a machine: its tunnel closes within a second and its certificates are refused",
		Args:  cobra.ExactArgs(1),
		RunE: a.run(false, func(ctx context.Context, cmd *cobra.Command, args []string, ops *admin.Ops) error {
			if err := ops.RevokeMachine(ctx, admin.CLI(), args[0]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "revoked machine %s\n", args[0])
			return nil
		}),
	}
	del := &cobra.Command{
		Use:   "delete ID",
		Short: "Revoke a machine and forget it and its buffered requests",
		Args:  cobra.ExactArgs(1),
		RunE: a.run(false, func(ctx context.Context, cmd *cobra.Command, args []string, ops *admin.Ops) error {
			if err := ops.DeleteMachine(ctx, admin.CLI(), args[0]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "deleted machine %s\n", args[0])
			return nil
		}),
	}
	cmd.AddCommand(list, revoke, del)
	return cmd
}

func (a *adminCLI) auditCmd() *cobra.Command {
	var since, user string
	var limit int
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "List security events, oldest first",
		Args:  cobra.NoArgs,
		RunE: a.run(false, func(ctx context.Context, cmd *cobra.Command, _ []string, ops *admin.Ops) error {
			q := admin.AuditQuery{UserID: user, Limit: limit}
			if since != "" {
				t, err := parseSince(since, time.Now())
				if err != nil {
					return err
				}
				q.Since = t
			}
			evs, err := ops.Audit(ctx, admin.CLI(), q)
			if err != nil {
				return err
			}
			if asJSON {
				out := make([]auditJSON, 0, len(evs))
				for _, e := range evs {
					out = append(out, auditJSON{ID: e.ID, At: e.At.UTC(), Actor: e.Actor, Action: e.Action, Target: e.Target, Remote: e.Remote, Outcome: e.Outcome, Detail: e.Detail})
				}
				return writeJSON(cmd.OutOrStdout(), out)
			}
			return table(cmd.OutOrStdout(), []string{"AT", "ACTOR", "ACTION", "TARGET", "OUTCOME", "REMOTE", "DETAIL"}, func(row func(...any)) {
				for _, e := range evs {
					row(when(e.At), dash(e.Actor), e.Action, dash(e.Target), e.Outcome, dash(e.Remote), dash(e.Detail))
				}
			})
		}),
	}
	cmd.Flags().StringVar(&since, "since", "", "only events this long ago or later (24h) or since a time (RFC 3339)")
	cmd.Flags().StringVar(&user, "user", "", "only events by or about this user")
	cmd.Flags().IntVar(&limit, "limit", 0, "at most this many, the newest (default 1000)")
	jsonFlag(cmd, &asJSON)
	return cmd
}

// parseSince reads --since: a duration before now or an RFC 3339 time.
func parseSince(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		if d < 0 {
			return time.Time{}, fmt.Errorf("--since %q: want a positive duration", s)
		}
		return now.Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("--since %q: want a duration like 24h or a time like 2026-01-02T15:04:05Z", s)
	}
	return t, nil
}

// printSecret prints secret alone on stdout (so that scripts can capture
// it) and what it is, with a warning, on stderr.
func printSecret(cmd *cobra.Command, secret, what string) {
	fmt.Fprintln(cmd.OutOrStdout(), secret)
	fmt.Fprintf(cmd.ErrOrStderr(), "%s. Store it now: it will not be shown again.\n", what)
}

func jsonFlag(cmd *cobra.Command, v *bool) {
	cmd.Flags().BoolVar(v, "json", false, "print JSON instead of a table")
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("write JSON: %w", err)
	}
	return nil
}

// table writes a header and the rows fill produces, aligned.
func table(w io.Writer, header []string, fill func(row func(...any))) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	fill(func(cells ...any) {
		s := make([]string, len(cells))
		for i, c := range cells {
			s[i] = fmt.Sprint(c)
		}
		fmt.Fprintln(tw, strings.Join(s, "\t"))
	})
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write table: %w", err)
	}
	return nil
}

func tokenState(t *store.Token, now time.Time) string {
	switch {
	case !t.RevokedAt.IsZero():
		return "revoked"
	case !t.Live(now):
		return "expired"
	}
	return "live"
}

// tokenScope describes t's scope for a table: "-" for an ordinary token,
// "device on m-1" for a paired device's, "pair on m-1" for a pairing
// ticket.
func tokenScope(t *store.Token) string {
	if t.Scope == "" && t.MachineID == "" {
		return "-"
	}
	return t.Scope + " on " + t.MachineID
}

// when formats t for a table: UTC to the second, "-" for never.
func when(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// tp is t for JSON: nil (left out) for never.
func tp(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func yes(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func article(r store.Role) string {
	if r == store.RoleOwner || r == store.RoleAdmin {
		return "an " + string(r)
	}
	return "a " + string(r)
}

// JSON shapes of the list commands: stable field names, times in RFC 3339
// UTC, "never" left out.
type (
	userJSON struct {
		ID        string     `json:"id"`
		Email     string     `json:"email,omitempty"`
		Admin     bool       `json:"admin"`
		Disabled  bool       `json:"disabled"`
		CreatedAt *time.Time `json:"created_at,omitempty"`
	}
	memberJSON struct {
		UserID string `json:"user_id"`
		Role   string `json:"role"`
	}
	teamJSON struct {
		ID        string       `json:"id"`
		CreatedAt *time.Time   `json:"created_at,omitempty"`
		Members   []memberJSON `json:"members"`
	}
	tokenJSON struct {
		ID           string     `json:"id"`
		UserID       string     `json:"user_id"`
		Name         string     `json:"name,omitempty"`
		State        string     `json:"state"`
		CreatedAt    *time.Time `json:"created_at,omitempty"`
		ExpiresAt    *time.Time `json:"expires_at,omitempty"`
		LastUsedAt   *time.Time `json:"last_used_at,omitempty"`
		LastUsedAddr string     `json:"last_used_addr,omitempty"`
		RevokedAt    *time.Time `json:"revoked_at,omitempty"`
		// Scope and MachineID: a paired device's token ("device") or a
		// pairing ticket ("pair"), for that machine only.
		Scope     string `json:"scope,omitempty"`
		MachineID string `json:"machine_id,omitempty"`
	}
	machineJSON struct {
		ID           string     `json:"id"`
		Name         string     `json:"name,omitempty"`
		OwnerUserID  string     `json:"owner_user_id,omitempty"`
		TeamID       string     `json:"team_id,omitempty"`
		Hostname     string     `json:"hostname,omitempty"`
		RegisteredAt *time.Time `json:"registered_at,omitempty"`
		LastSeen     *time.Time `json:"last_seen,omitempty"`
		RevokedAt    *time.Time `json:"revoked_at,omitempty"`
	}
	auditJSON struct {
		ID      int64     `json:"id"`
		At      time.Time `json:"at"`
		Actor   string    `json:"actor"`
		Action  string    `json:"action"`
		Target  string    `json:"target,omitempty"`
		Remote  string    `json:"remote,omitempty"`
		Outcome string    `json:"outcome"`
		Detail  string    `json:"detail,omitempty"`
	}
)
