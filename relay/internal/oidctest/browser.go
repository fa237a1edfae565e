package oidctest

import (
	"context"
	"errors"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

// SignIn does on the provider's pages what a person does in a browser with
// the URL and code a device showed them: opens verificationURI, enters
// userCode, logs in as username with password, and allows the device (or,
// with allow false, denies it). An error carries what the page said.
func SignIn(ctx context.Context, verificationURI, userCode, username, password string, allow bool) error {
	jar, err := cookiejar.New(nil)
	if err != nil {
		return err
	}
	b := &browser{ctx: ctx, c: &http.Client{Jar: jar}}
	// The code form.
	page, err := b.get(verificationURI)
	if err != nil {
		return err
	}
	f, err := page.form()
	if err != nil {
		return err
	}
	f.values.Set("user_code", userCode)
	// The login form, carrying the code.
	if page, err = b.post(f); err != nil {
		return err
	}
	if f, err = page.form(); err != nil {
		return err
	}
	if f.values.Get("user_code") != userCode {
		return fmt.Errorf("the login page carries code %q, not %q", f.values.Get("user_code"), userCode)
	}
	f.values.Set("username", username)
	f.values.Set("password", password)
	if page, err = b.post(f); err != nil {
		return err
	}
	// The consent page: two buttons that navigate to ./confirm?action=….
	action := "denied"
	if allow {
		action = "allowed"
	}
	var next *url.URL
	for _, m := range regexp.MustCompile(`location\.href='([^']+)'`).FindAllStringSubmatch(page.body, -1) {
		u, err := page.url.Parse(html.UnescapeString(m[1]))
		if err == nil && u.Query().Get("action") == action {
			next = u
		}
	}
	if next == nil {
		return fmt.Errorf("no %q button on %s: %s", action, page.url, page.problem())
	}
	if page, err = b.get(next.String()); err != nil {
		return err
	}
	if want := "Device authorization " + action; !strings.Contains(page.body, want) {
		return fmt.Errorf("after %s, %s says: %s", action, page.url, page.problem())
	}
	return nil
}

type browser struct {
	ctx context.Context
	c   *http.Client
}

type page struct {
	url  *url.URL
	body string
}

type form struct {
	action *url.URL
	values url.Values
}

func (b *browser) get(u string) (*page, error) {
	req, err := http.NewRequestWithContext(b.ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	return b.do(req)
}

func (b *browser) post(f *form) (*page, error) {
	req, err := http.NewRequestWithContext(b.ctx, http.MethodPost, f.action.String(), strings.NewReader(f.values.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return b.do(req)
}

func (b *browser) do(req *http.Request) (*page, error) {
	resp, err := b.c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	p := &page{url: resp.Request.URL, body: string(body)}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s %s: %s: %s", req.Method, req.URL, resp.Status, p.problem())
	}
	return p, nil
}

var (
	formRe   = regexp.MustCompile(`(?s)<form([^>]*)>(.*?)</form>`)
	actionRe = regexp.MustCompile(`action="([^"]*)"`)
	inputRe  = regexp.MustCompile(`<input([^>]*)>`)
	nameRe   = regexp.MustCompile(`name="([^"]*)"`)
	valueRe  = regexp.MustCompile(`value="([^"]*)"`)
	errorRe  = regexp.MustCompile(`(?s)<p style="color:red[^"]*">(.*?)</p>`)
)

// form returns the page's form with its inputs' values, posting to its
// action (the page itself when it has none), or the page's error.
func (p *page) form() (*form, error) {
	m := formRe.FindStringSubmatch(p.body)
	if m == nil {
		return nil, fmt.Errorf("no form on %s: %s", p.url, p.problem())
	}
	if msg := p.errorText(); msg != "" {
		return nil, errors.New(msg)
	}
	f := &form{action: p.url, values: url.Values{}}
	if a := actionRe.FindStringSubmatch(m[1]); a != nil {
		u, err := p.url.Parse(html.UnescapeString(a[1]))
		if err != nil {
			return nil, fmt.Errorf("form action on %s: %w", p.url, err)
		}
		f.action = u
	}
	for _, in := range inputRe.FindAllStringSubmatch(m[2], -1) {
		n := nameRe.FindStringSubmatch(in[1])
		if n == nil {
			continue
		}
		v := ""
		if vm := valueRe.FindStringSubmatch(in[1]); vm != nil {
			v = html.UnescapeString(vm[1])
		}
		f.values.Set(html.UnescapeString(n[1]), v)
	}
	return f, nil
}

// errorText is the error the provider's page shows, if any.
func (p *page) errorText() string {
	if m := errorRe.FindStringSubmatch(p.body); m != nil {
		return strings.TrimSpace(html.UnescapeString(m[1]))
	}
	return ""
}

// problem describes the page for an error message.
func (p *page) problem() string {
	if msg := p.errorText(); msg != "" {
		return msg
	}
	s := strings.Join(strings.Fields(regexp.MustCompile(`<[^>]*>`).ReplaceAllString(p.body, " ")), " ")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// DeviceLogin runs the device flow for clientID as a device does, with the
// person's part done by SignIn as username, and returns the ID token.
func (p *Provider) DeviceLogin(ctx context.Context, clientID, username, password string) (string, error) {
	ctx = oidc.ClientContext(ctx, &http.Client{Timeout: 30 * time.Second})
	prov, err := oidc.NewProvider(ctx, p.Issuer)
	if err != nil {
		return "", err
	}
	ep := prov.Endpoint()
	ep.AuthStyle = oauth2.AuthStyleInParams // a public client
	c := &oauth2.Config{ClientID: clientID, Endpoint: ep, Scopes: []string{"openid", "email", "profile"}}
	da, err := c.DeviceAuth(ctx)
	if err != nil {
		return "", fmt.Errorf("device authorization: %w", err)
	}
	if err := SignIn(ctx, da.VerificationURI, da.UserCode, username, password, true); err != nil {
		return "", err
	}
	tok, err := c.DeviceAccessToken(ctx, da)
	if err != nil {
		return "", fmt.Errorf("device access token: %w", err)
	}
	id, _ := tok.Extra("id_token").(string)
	if id == "" {
		return "", errors.New("no id_token in the token response")
	}
	return id, nil
}
