package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/betcode-dev/betcode/agent/client"
	"github.com/betcode-dev/betcode/shared/authtoken"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// loginTimeout bounds the WhoAmI call that checks a token.
const loginTimeout = 30 * time.Second

func newLoginCmd(g *globals) *cobra.Command {
	var withOIDC bool
	cmd := &cobra.Command{
		Use:   "login --relay HOST:PORT [--relay-ca FILE] [--oidc]",
		Short: "Store a client token for a relay, after checking it with the relay",
		Long: `Read a client token (bct_…, from the relay's administrator or betcode-relay admin)
without echoing it when stdin is a terminal, else from the first line of stdin;
check it with the relay (WhoAmI); store the relay, its CA and the token in
$XDG_CONFIG_HOME/betcode/credentials.json (mode 0600). Later commands go
through that relay with that token unless --relay or --agent says otherwise;
BETCODE_TOKEN overrides the stored token.

With --oidc, sign in with the relay's identity provider instead (OpenID
Connect, device flow): betcode prints a URL and a code, you open the URL in
any browser, enter the code and sign in there, and the relay turns the
result into a client token for the BetCode user with your verified email.
Ctrl-C cancels.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			path, err := client.CredentialsPath()
			if err != nil {
				return err
			}
			relay, ca := g.v.GetString("relay"), g.v.GetString("relay-ca")
			if relay == "" {
				if old, err := client.LoadCredentials(path); err == nil {
					relay = old.Relay // log in again to the same relay
					if ca == "" {
						ca = old.RelayCA
					}
				}
			}
			if relay == "" {
				return &client.ExitError{Code: client.ExitInvalidArgs, Err: errors.New("which relay? pass --relay HOST:PORT")}
			}
			if ca != "" {
				if ca, err = filepath.Abs(ca); err != nil {
					return &client.ExitError{Code: client.ExitInvalidArgs, Err: fmt.Errorf("--relay-ca: %w", err)}
				}
			}
			var tok string
			if withOIDC {
				// Ctrl-C ends the wait for the browser, not the process.
				ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt)
				defer stop()
				if tok, err = loginOIDC(ctx, cmd.ErrOrStderr(), relay, ca); err != nil {
					return err
				}
			} else {
				if tok, err = readToken(cmd); err != nil {
					return err
				}
				if err := authtoken.Check(authtoken.Client, tok); err != nil {
					return &client.ExitError{Code: client.ExitInvalidArgs, Err: err}
				}
			}
			return saveLogin(cmd, path, relay, ca, tok)
		},
	}
	cmd.Flags().BoolVar(&withOIDC, "oidc", false, "sign in with the relay's identity provider (OpenID Connect device flow) instead of pasting a token")
	return cmd
}

// saveLogin checks tok with the relay, stores it as the credentials at
// path and says who is logged in.
func saveLogin(cmd *cobra.Command, path, relay, ca, tok string) error {
	who, err := whoAmI(cmd.Context(), relay, ca, tok)
	if err != nil {
		return err
	}
	creds := &client.Credentials{Relay: relay, RelayCA: ca, Token: tok, User: who.GetUser().GetId()}
	if err := creds.Save(path); err != nil {
		return err
	}
	expires := "never expires"
	if who.TokenExpiresAt != nil {
		expires = "expires " + who.TokenExpiresAt.AsTime().Local().Format(time.DateTime)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "logged in to %s as %s (token %s, %s)\n", relay, creds.User, who.TokenId, expires)
	if os.Getenv(envToken) != "" {
		fmt.Fprintf(cmd.ErrOrStderr(), "note: %s is set; it overrides the stored token until you unset it\n", envToken)
	}
	return nil
}

// whoAmI asks the relay whose token tok is.
func whoAmI(ctx context.Context, relay, ca, tok string) (*pb.WhoAmIResponse, error) {
	conn, err := client.Dial(relay, client.DialOptions{CAFile: ca, TLS: true, Token: tok})
	if err != nil {
		return nil, &client.ExitError{Code: client.ExitConnection, Err: err}
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, loginTimeout)
	defer cancel()
	who, err := pb.NewAdminServiceClient(conn).WhoAmI(ctx, &pb.WhoAmIRequest{})
	if status.Code(err) == codes.Unauthenticated {
		return nil, &client.ExitError{Code: client.ExitPermission, Err: fmt.Errorf("the relay refused this token: %s", status.Convert(err).Message())}
	}
	if err != nil {
		return nil, fmt.Errorf("check the token with %s: %w", relay, err)
	}
	return who, nil
}

// readToken reads the token without echo from a terminal, else the first
// line of stdin.
func readToken(cmd *cobra.Command) (string, error) {
	in := cmd.InOrStdin()
	if f, ok := in.(*os.File); ok && isTerminal(f) {
		fmt.Fprint(cmd.ErrOrStderr(), "client token: ")
		b, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(cmd.ErrOrStderr())
		if err != nil {
			return "", fmt.Errorf("read the token: %w", err)
		}
		return strings.TrimSpace(string(b)), nil
	}
	line, err := bufio.NewReader(io.LimitReader(in, 4096)).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("read the token from stdin: %w", err)
	}
	tok := strings.TrimSpace(line)
	if tok == "" {
		return "", &client.ExitError{Code: client.ExitInvalidArgs, Err: errors.New("no token on stdin: type it at the prompt, or pipe it in (e.g. betcode login --relay HOST:PORT < token-file)")}
	}
	return tok, nil
}

func newLogoutCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "logout",
		Short: "Forget the stored client token",
		Long: `Delete the credentials betcode login stored. The token itself stays valid on
the relay until it expires or is revoked.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			path, err := client.CredentialsPath()
			if err != nil {
				return err
			}
			relay := ""
			if old, err := client.LoadCredentials(path); err == nil {
				relay = old.Relay
			}
			removed, err := client.RemoveCredentials(path)
			if err != nil {
				return err
			}
			switch {
			case !removed:
				fmt.Fprintln(cmd.OutOrStdout(), "not logged in; nothing to do")
			case relay != "":
				fmt.Fprintf(cmd.OutOrStdout(), "logged out of %s (removed %s)\n", relay, path)
			default:
				fmt.Fprintf(cmd.OutOrStdout(), "removed %s\n", path)
			}
			return nil
		},
	}
}
