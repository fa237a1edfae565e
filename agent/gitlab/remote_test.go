package gitlab

import (
	"net/url"
	"strings"
	"testing"
)

func TestParseRemote(t *testing.T) {
	tests := []struct {
		name, raw string
		want      Remote
		wantErr   bool
	}{
		{name: "https", raw: "https://gitlab.com/group/repo.git", want: Remote{"https", "gitlab.com", "group/repo"}},
		{name: "https no .git", raw: "https://gitlab.com/group/sub/repo", want: Remote{"https", "gitlab.com", "group/sub/repo"}},
		{name: "https trailing slash", raw: "https://gitlab.com/group/repo/", want: Remote{"https", "gitlab.com", "group/repo"}},
		{name: "https credentials dropped", raw: "https://oauth2:glpat-secret@GitLab.Example.com:8443/g/r.git", want: Remote{"https", "gitlab.example.com", "g/r"}},
		{name: "http", raw: "http://10.0.0.5/g/r.git", want: Remote{"http", "10.0.0.5", "g/r"}},
		{name: "ssh url", raw: "ssh://git@gitlab.com/group/repo.git", want: Remote{"ssh", "gitlab.com", "group/repo"}},
		{name: "ssh url port", raw: "ssh://git@gitlab.example.com:2222/group/repo.git", want: Remote{"ssh", "gitlab.example.com", "group/repo"}},
		{name: "git+ssh", raw: "git+ssh://git@gitlab.com/a/b", want: Remote{"ssh", "gitlab.com", "a/b"}},
		{name: "scp", raw: "git@gitlab.com:group/sub/repo.git", want: Remote{"ssh", "gitlab.com", "group/sub/repo"}},
		{name: "scp no user", raw: "gitlab.com:group/repo", want: Remote{"ssh", "gitlab.com", "group/repo"}},
		{name: "dots dashes", raw: "git@gitlab.com:my-group/my.repo_1.git", want: Remote{"ssh", "gitlab.com", "my-group/my.repo_1"}},
		{name: "empty", raw: "", wantErr: true},
		{name: "local path", raw: "/srv/git/repo.git", wantErr: true},
		{name: "file url", raw: "file:///srv/git/repo.git", wantErr: true},
		{name: "one segment", raw: "https://gitlab.com/repo.git", wantErr: true},
		{name: "dot dot", raw: "https://gitlab.com/group/../repo", wantErr: true},
		{name: "no host", raw: "https:///group/repo", wantErr: true},
		{name: "query chars", raw: "https://gitlab.com/group/re po", wantErr: true},
		{name: "scp path with slash first", raw: "./a:b/c", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseRemote(tc.raw)
			if (err != nil) != tc.wantErr {
				t.Fatalf("ParseRemote(%q) = %+v, %v; want error %v", tc.raw, got, err, tc.wantErr)
			}
			if got != tc.want {
				t.Fatalf("ParseRemote(%q) = %+v, want %+v", tc.raw, got, tc.want)
			}
			if err != nil && strings.Contains(err.Error(), "secret") {
				t.Fatalf("error shows credentials: %v", err)
			}
		})
	}
}

func TestRemoteProjectOn(t *testing.T) {
	tests := []struct {
		name, remote, base string
		want               string
		ok                 bool
	}{
		{name: "same host", remote: "https://gitlab.com/g/r.git", base: "https://gitlab.com", want: "g/r", ok: true},
		{name: "ssh port differs", remote: "ssh://git@gitlab.example.com:2222/g/r", base: "https://gitlab.example.com", want: "g/r", ok: true},
		{name: "host case", remote: "git@GITLAB.com:g/r", base: "https://gitlab.com/", want: "g/r", ok: true},
		{name: "other host", remote: "git@github.com:g/r.git", base: "https://gitlab.com", ok: false},
		{name: "relative root https", remote: "https://example.com/gitlab/g/r.git", base: "https://example.com/gitlab", want: "g/r", ok: true},
		{name: "relative root ssh", remote: "git@example.com:g/r.git", base: "https://example.com/gitlab", want: "g/r", ok: true},
		{name: "relative root missing", remote: "https://example.com/other/g/r.git", base: "https://example.com/gitlab", ok: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := ParseRemote(tc.remote)
			if err != nil {
				t.Fatal(err)
			}
			base, _ := url.Parse(tc.base)
			got, ok := r.ProjectOn(base)
			if got != tc.want || ok != tc.ok {
				t.Fatalf("ProjectOn = %q, %v; want %q, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

func FuzzParseRemote(f *testing.F) {
	for _, s := range []string{
		"https://gitlab.com/group/repo.git", "git@gitlab.com:g/r.git", "ssh://git@h:22/a/b/c",
		"https://user:tok@h/a/b", "gitlab.com:", "://", "ssh://@/", "a@b@c:d/e", "https://h/a/b/.git",
	} {
		f.Add(s)
	}
	base, _ := url.Parse("https://gitlab.com/root")
	f.Fuzz(func(t *testing.T, raw string) {
		r, err := ParseRemote(raw)
		if err != nil {
			if strings.Contains(raw, "://") && strings.Contains(err.Error(), "@") && !strings.Contains(err.Error(), "***@") {
				// redact must have removed user info of URL-like remotes
				// (an @ may remain after the host, in the path).
				scheme, rest, _ := strings.Cut(raw, "://")
				_ = scheme
				if i := strings.IndexAny(rest, "/?#"); i < 0 || strings.Contains(rest[:i], "@") {
					t.Fatalf("error shows user info: %v", err)
				}
			}
			return
		}
		if CheckProjectPath(r.Path) != nil || r.Host == "" || strings.ContainsAny(r.Host, "@/") {
			t.Fatalf("ParseRemote(%q) = %+v: invalid result", raw, r)
		}
		if strings.HasSuffix(r.Path, ".git") && !strings.HasSuffix(strings.TrimSuffix(strings.Trim(raw, "/ \t\n"), ".git"), ".git") {
			t.Fatalf("ParseRemote(%q) kept .git: %+v", raw, r)
		}
		if p, ok := r.ProjectOn(base); ok && CheckProjectPath(p) != nil {
			t.Fatalf("ProjectOn(%+v) = invalid %q", r, p)
		}
	})
}
