package permission

import (
	"slices"
	"strings"
	"testing"
)

// parts renders the splitter's output as "text" with "!" for unsafe parts
// and "=core" when the core differs.
func parts(cmd string) []string {
	var out []string
	sp := newSplitter(cmd)
	for sub, ok := sp.next(); ok; sub, ok = sp.next() {
		p := sub.text
		if sub.core != sub.text {
			p += " =" + sub.core
			if sub.env {
				p += " (env)"
			}
		}
		if sub.unsafe {
			p += " !"
		}
		out = append(out, p)
	}
	return out
}

func TestSplit(t *testing.T) {
	tests := []struct {
		name string
		cmd  string
		want []string
	}{
		{"empty", "", nil},
		{"blank", " \t\n ", nil},
		{"simple", "git status", []string{"git status"}},
		{"and", "a && b", []string{"a", "b"}},
		{"or", "a||b", []string{"a", "b"}},
		{"semicolon", "a; b;", []string{"a", "b"}},
		{"pipe", "a | b |& c", []string{"a", "b", "c"}},
		{"background", "a & b", []string{"a", "b"}},
		{"newline", "a\nb\r\nc", []string{"a", "b", "c"}},
		{"empty parts", "a ;; && b", []string{"a", "b"}},
		{"single quotes", "echo 'a && b; c | d'", []string{"echo 'a && b; c | d'"}},
		{"double quotes", `echo "a && b" && c`, []string{`echo "a && b"`, "c"}},
		{"escaped quote", `echo "a \" && b" && c`, []string{`echo "a \" && b"`, "c"}},
		{"backslash operator", `find . -exec rm {} \; && x`, []string{`find . -exec rm {} \;`, "x"}},
		{"escaped newline", "a \\\n b", []string{"a \\\n b"}},
		{"unterminated quote", `echo "a && b`, []string{`echo "a && b`}},
		{"single quote keeps backslash", `echo 'a\' && b`, []string{`echo 'a\'`, "b"}},
		{"substitution", "echo $(date) x", []string{"echo $(date) x !", "date"}},
		{"substitution with operators", "echo $(a && b) && c", []string{"echo $(a && b) !", "a", "b", "c"}},
		{"nested substitution", "echo $(a $(b))", []string{"echo $(a $(b)) !", "a $(b) !", "b"}},
		{"substitution in double quotes", `git commit -m "$(cat <<'EOF'` + "\nmsg && x\nEOF\n)\" && rm y", []string{`git commit -m "$(cat <<'EOF'` + "\nmsg && x\nEOF\n)\" !", "cat <<'EOF'", "msg", "x", "EOF", "rm y"}},
		{"backticks", "echo `id` && b", []string{"echo `id` !", "id", "b"}},
		{"process substitution", "diff <(a) >(b)", []string{"diff <(a) >(b) !", "b", "a"}},
		{"substitution in single quotes", `echo '$(a)'`, []string{`echo '$(a)'`}},
		{"redirect file", "echo x > f", []string{"echo x > f !"}},
		{"redirect append", "echo x >> f", []string{"echo x >> f !"}},
		{"redirect clobber", "echo x >| f", []string{"echo x >| f !"}},
		{"redirect both", "make &> log && b", []string{"make &> log !", "b"}},
		{"redirect and file", "make >& log", []string{"make >& log !"}},
		{"dup", "make 2>&1 >&2 2>&-", []string{"make 2>&1 >&2 2>&-"}},
		{"dev null", "a >/dev/null 2> /dev/null &>/dev/null", []string{"a >/dev/null 2> /dev/null &>/dev/null"}},
		{"dev null prefix", "a > /dev/nullx", []string{"a > /dev/nullx !"}},
		{"input redirect", "a < f <&3", []string{"a < f <&3"}},
		{"subshell", "(cd x && rm y)", []string{"cd x", "rm y"}},
		{"brace group", "{ a; b; }", []string{"a", "b"}},
		{"keywords", "if a; then b; else c; fi", []string{"a", "b", "c"}},
		{"loop", "for f in *; do rm $f; done", []string{"for f in *", "rm $f"}},
		{"while", "while true; do x; done", []string{"true", "x"}},
		{"negation", "! a", []string{"a"}},
		{"keyword prefix word", "done_x", []string{"done_x"}},
		{"paren kept", "echo (a)", []string{"echo (a)"}},
		{"env", "A=1 B='x y' make", []string{"A=1 B='x y' make =make (env)"}},
		{"not env", "=1 make", []string{"=1 make"}},
		{"wrappers", "nohup nice -n 5 timeout -k 3 10s make", []string{"nohup nice -n 5 timeout -k 3 10s make =make"}},
		{"time", "time -p make", []string{"time -p make =make"}},
		{"bare wrapper", "nohup", []string{"nohup"}},
		{"timeout long opts", "timeout --signal KILL --preserve-status 5 x", []string{"timeout --signal KILL --preserve-status 5 x =x"}},
		{"env then wrapper", "CI=1 timeout 5 make", []string{"CI=1 timeout 5 make =make (env)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := parts(tt.cmd); !slices.Equal(got, tt.want) {
				t.Errorf("split(%q)\n got %q\nwant %q", tt.cmd, got, tt.want)
			}
		})
	}
}

func TestSplitDeepNesting(t *testing.T) {
	cmd := strings.Repeat("$(", 20) + "rm -rf /" + strings.Repeat(")", 20)
	got := parts("echo " + cmd)
	if len(got) == 0 || !strings.HasSuffix(got[0], "!") {
		t.Fatalf("outer part not unsafe: %q", got)
	}
}

func TestCommandPattern(t *testing.T) {
	tests := []struct {
		pattern string
		cmd     string
		want    bool
	}{
		{"git status", "git status", true},
		{"git status", "git  status", true},
		{"git status", "git status -s", false},
		{"git status", "git", false},
		{"git *", "git", true},
		{"git *", "git log", true},
		{"git *", "gitk", false},
		{"git:*", "git", true},
		{"git:*", "git log -p", true},
		{"git:*", "gitk", false},
		{"git*", "gitk", true},
		{"git*", "git", true},
		{"* install", "npm install", true},
		{"* install", "install", false},
		{"* install", "npm install x", false},
		{"a * b * c", "a x b y c", true},
		{"a * b * c", "a x c", false},
		{"a*b*c", "abbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbd", false},
		{"npm  run   test", "npm run test", true},
		{`echo \*`, "echo *", true},
		{`echo \*`, "echo x", false},
		{`echo \\*`, `echo \*`, true},
		{"echo a:b", "echo a:b", true},
	}
	for _, tt := range tests {
		p, err := compileCommand(tt.pattern)
		if err != nil {
			t.Fatalf("compile %q: %v", tt.pattern, err)
		}
		if got := p.match(tt.cmd); got != tt.want {
			t.Errorf("Bash(%s) on %q = %v, want %v", tt.pattern, tt.cmd, got, tt.want)
		}
	}
}
