package gitlab

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// Remote is where a git remote URL points: a host and a project path.
type Remote struct {
	// Scheme is "https", "http" or "ssh" (scp-like "git@host:path" too).
	Scheme string
	// Host is the lower-cased host name, without port or user.
	Host string
	// Path is the project's path without ".git" and slashes around it, e.g.
	// "group/sub/repo".
	Path string
}

// String is the remote without credentials, e.g. "ssh://gitlab.com/group/repo".
func (r Remote) String() string { return r.Scheme + "://" + r.Host + "/" + r.Path }

// ErrBadRemote is returned for a remote URL that names no project.
var ErrBadRemote = errors.New("not a remote URL of a project")

// ParseRemote parses a git remote URL: https://[user[:pass]@]host[:port]/path[.git],
// ssh://[user@]host[:port]/path[.git], git+ssh:// and ssh+git:// the same, and
// scp-like [user@]host:path[.git]. Credentials in the URL are dropped.
func ParseRemote(raw string) (Remote, error) {
	raw = strings.TrimSpace(raw)
	bad := func(why string) (Remote, error) {
		return Remote{}, fmt.Errorf("%w: %s (%s)", ErrBadRemote, redact(raw), why)
	}
	if raw == "" {
		return bad("empty")
	}
	var r Remote
	var path string
	if scheme, rest, ok := strings.Cut(raw, "://"); ok {
		switch strings.ToLower(scheme) {
		case "https", "http":
			r.Scheme = strings.ToLower(scheme)
		case "ssh", "git+ssh", "ssh+git":
			r.Scheme = "ssh"
		default:
			return bad("scheme " + scheme + " is not https, http or ssh")
		}
		u, err := url.Parse(r.Scheme + "://" + rest)
		if err != nil {
			return bad("unparsable URL")
		}
		r.Host, path = u.Hostname(), u.Path
	} else {
		// scp-like: [user@]host:path, where host has no slash before the colon.
		hostPart, p, ok := strings.Cut(raw, ":")
		if !ok || strings.Contains(hostPart, "/") {
			return bad("want https://host/path, ssh://host/path or user@host:path")
		}
		if i := strings.LastIndex(hostPart, "@"); i >= 0 {
			hostPart = hostPart[i+1:]
		}
		r.Scheme, r.Host, path = "ssh", hostPart, p
	}
	r.Host = strings.ToLower(r.Host)
	if r.Host == "" || strings.ContainsAny(r.Host, "@/\\ ") {
		return bad("no host")
	}
	path = strings.Trim(path, "/")
	path = strings.TrimSuffix(path, ".git")
	path = strings.TrimSuffix(path, "/")
	if err := CheckProjectPath(path); err != nil {
		return bad(err.Error())
	}
	r.Path = path
	return r, nil
}

// CheckProjectPath accepts a GitLab full path: two or more segments of
// letters, digits, '_', '-' and '.', none "." or "..".
func CheckProjectPath(p string) error {
	segs := strings.Split(p, "/")
	if len(segs) < 2 {
		return fmt.Errorf("project path %q: want namespace/project", p)
	}
	for _, s := range segs {
		if s == "" || s == "." || s == ".." {
			return fmt.Errorf("project path %q: empty or dot segment", p)
		}
		for _, c := range s {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
				return fmt.Errorf("project path %q: %q is not allowed", p, c)
			}
		}
	}
	return nil
}

// redact drops the user information of a URL-like remote, which may hold a
// token, for messages.
func redact(raw string) string {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return raw
	}
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	if i := strings.LastIndex(rest[:end], "@"); i >= 0 {
		rest = "***@" + rest[i+1:]
	}
	return scheme + "://" + rest
}

// ProjectOn returns the project path of r on the GitLab at base, or false
// when r is elsewhere. Hosts match by name (ssh remotes use another port);
// an https remote's path must start with base's path (a GitLab served
// under a relative URL, e.g. https://example.com/gitlab).
func (r Remote) ProjectOn(base *url.URL) (string, bool) {
	if r.Host != strings.ToLower(base.Hostname()) {
		return "", false
	}
	if r.Scheme == "ssh" {
		return r.Path, true
	}
	root := strings.Trim(base.Path, "/")
	if root == "" {
		return r.Path, true
	}
	p, ok := strings.CutPrefix(r.Path, root+"/")
	if !ok || CheckProjectPath(p) != nil {
		return "", false
	}
	return p, true
}
