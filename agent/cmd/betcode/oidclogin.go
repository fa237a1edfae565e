package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/betcode-dev/betcode/agent/client"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/mtls"
)

// idpTimeout bounds each request to the identity provider (discovery, the
// device authorization, each poll).
const idpTimeout = 30 * time.Second

// errNoOIDC: the relay offers no OIDC sign-in.
var errNoOIDC = errors.New("this relay has no OIDC sign-in; log in with a token (betcode login --relay HOST:PORT, then paste a bct_… token from an administrator)")

// loginOIDC signs in with the relay's identity provider through the OAuth
// 2.0 device flow (RFC 8628) and returns the relay client token the relay
// made of the ID token. It tells the person what to do on w. ctx ending
// (Ctrl-C) cancels.
func loginOIDC(ctx context.Context, w io.Writer, relay, ca string) (string, error) {
	conn, err := client.Dial(relay, client.DialOptions{CAFile: ca, TLS: true})
	if err != nil {
		return "", &client.ExitError{Code: client.ExitConnection, Err: err}
	}
	defer conn.Close()
	svc := pb.NewOIDCServiceClient(conn)
	cctx, cancel := context.WithTimeout(ctx, loginTimeout)
	cfg, err := svc.GetOIDCConfig(cctx, &pb.GetOIDCConfigRequest{})
	cancel()
	switch {
	case status.Code(err) == codes.Unimplemented || err == nil && !cfg.GetEnabled():
		return "", &client.ExitError{Code: client.ExitInvalidArgs, Err: errNoOIDC}
	case err != nil:
		return "", &client.ExitError{Code: client.ExitConnection, Err: fmt.Errorf("ask %s how to sign in: %w", relay, err)}
	}
	if err := checkIssuer(cfg.Issuer); err != nil {
		return "", &client.ExitError{Code: client.ExitPermission, Err: fmt.Errorf("the relay's identity provider: %w", err)}
	}

	idToken, err := deviceFlow(ctx, w, cfg)
	if err != nil {
		return "", err
	}

	cctx, cancel = context.WithTimeout(ctx, loginTimeout)
	defer cancel()
	resp, err := svc.ExchangeOIDCToken(cctx, &pb.ExchangeOIDCTokenRequest{IdToken: idToken})
	switch status.Code(err) {
	case codes.OK:
		return resp.GetToken(), nil
	case codes.FailedPrecondition:
		return "", &client.ExitError{Code: client.ExitInvalidArgs, Err: errNoOIDC}
	case codes.PermissionDenied, codes.Unauthenticated:
		return "", &client.ExitError{Code: client.ExitPermission, Err: fmt.Errorf("the relay refused the sign-in: %s", status.Convert(err).Message())}
	}
	return "", fmt.Errorf("exchange the ID token with %s: %w", relay, err)
}

// deviceFlow runs the device authorization grant with the provider cfg
// names and returns the ID token.
func deviceFlow(ctx context.Context, w io.Writer, cfg *pb.GetOIDCConfigResponse) (string, error) {
	// Every request to the provider is bounded; the system's roots verify
	// it (the relay's CA is the relay's, not the provider's).
	ctx = oidc.ClientContext(ctx, &http.Client{Timeout: idpTimeout})
	dctx, cancel := context.WithTimeout(ctx, idpTimeout)
	p, err := oidc.NewProvider(dctx, cfg.Issuer)
	cancel()
	if err != nil {
		return "", &client.ExitError{Code: client.ExitConnection, Err: fmt.Errorf("discover the identity provider %s: %w", cfg.Issuer, err)}
	}
	ep := p.Endpoint()
	if ep.DeviceAuthURL == "" {
		return "", &client.ExitError{Code: client.ExitPermission, Err: fmt.Errorf("the identity provider %s does not offer the device flow (its discovery document has no device_authorization_endpoint)", cfg.Issuer)}
	}
	// A public client: its id goes in the form, no secret anywhere.
	ep.AuthStyle = oauth2.AuthStyleInParams
	oc := &oauth2.Config{ClientID: cfg.ClientId, Endpoint: ep, Scopes: cfg.Scopes}

	dctx, cancel = context.WithTimeout(ctx, idpTimeout)
	da, err := oc.DeviceAuth(dctx)
	cancel()
	if err != nil {
		return "", &client.ExitError{Code: client.ExitPermission, Err: fmt.Errorf("the identity provider refused to start a sign-in for client %q: %s", cfg.ClientId, describeOAuthError(err))}
	}
	fmt.Fprintf(w, "To sign in, open %s and enter code %s\n", da.VerificationURI, da.UserCode)
	if da.VerificationURIComplete != "" {
		fmt.Fprintf(w, "  (or open %s)\n", da.VerificationURIComplete)
	}
	until := ""
	if !da.Expiry.IsZero() {
		until = " (the code expires at " + da.Expiry.Local().Format(time.TimeOnly) + ")"
	}
	fmt.Fprintf(w, "Waiting for the sign-in to finish%s; Ctrl-C cancels…\n", until)

	tok, err := oc.DeviceAccessToken(ctx, da)
	if err != nil {
		var re *oauth2.RetrieveError
		switch {
		case ctx.Err() != nil:
			return "", &client.ExitError{Code: client.ExitPermission, Err: errors.New("sign-in cancelled; not logged in")}
		case errors.As(err, &re) && re.ErrorCode == "access_denied":
			return "", &client.ExitError{Code: client.ExitPermission, Err: errors.New("the sign-in was denied at the identity provider; not logged in")}
		case errors.As(err, &re) && re.ErrorCode == "expired_token", errors.Is(err, context.DeadlineExceeded):
			return "", &client.ExitError{Code: client.ExitPermission, Err: errors.New("the code expired before the sign-in finished; run betcode login --oidc again")}
		}
		return "", &client.ExitError{Code: client.ExitPermission, Err: fmt.Errorf("sign-in with the identity provider failed: %s", describeOAuthError(err))}
	}
	id, _ := tok.Extra("id_token").(string)
	if id == "" {
		return "", &client.ExitError{Code: client.ExitPermission, Err: fmt.Errorf("the identity provider returned no ID token (it must allow client %q the openid scope)", cfg.ClientId)}
	}
	return id, nil
}

// describeOAuthError is an OAuth error's code and description, not the
// whole response the oauth2 package quotes.
func describeOAuthError(err error) string {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) && re.ErrorCode != "" {
		if re.ErrorDescription != "" {
			return re.ErrorCode + ": " + re.ErrorDescription
		}
		return re.ErrorCode
	}
	return err.Error()
}

// checkIssuer accepts an https issuer, or an http one on loopback (a test
// provider): the sign-in must not travel in clear.
func checkIssuer(issuer string) error {
	u, err := url.Parse(issuer)
	switch {
	case err != nil || u.Host == "":
		return fmt.Errorf("issuer %q is not a URL", issuer)
	case u.Scheme == "https":
		return nil
	case u.Scheme == "http" && mtls.LoopbackHost(u.Hostname()):
		return nil
	}
	return fmt.Errorf("issuer %q: refusing to sign in without https", issuer)
}
