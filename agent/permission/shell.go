package permission

import "strings"

// This file splits a Bash command into the simple commands that rules are
// matched against. It is not a shell parser; it is built so that its
// mistakes fail safe. A part it cannot make sense of is still a part, so an
// allow rule has to match it too, and anything it over-splits (here-doc
// bodies, operators inside $(...)) only adds parts that must be allowed.

// subCmd is one simple command of a Bash command line.
type subCmd struct {
	text string // trimmed, with leading "(", "{", "!" and keywords (do, then, ...) removed
	core string // text without leading VAR=value assignments and wrappers (timeout, nice, nohup, time)
	env  bool   // core dropped VAR=value assignments
	// unsafe: the part runs a command substitution ($(...), `...`, <(...))
	// or redirects output to a file. Only exact and tool-wide rules may
	// allow it; a wildcard allow rule cannot vouch for what it runs or writes.
	unsafe bool
}

// splitter yields the parts of a command separated by &&, ||, ;, |, |&, &
// and newlines outside quotes. The commands inside $(...), `...`, <(...) and
// >(...) are parts of their own, after the part that holds them. It does not
// allocate.
type splitter struct {
	frames [maxNesting]frame
	depth  int // frames in use
}

type frame struct {
	s string
	i int
}

// maxNesting bounds nested substitutions; deeper ones are not split out
// (their outer part is unsafe already, so they can only miss a deny rule).
const maxNesting = 8

func newSplitter(s string) splitter {
	return splitter{frames: [maxNesting]frame{{s: s}}, depth: 1}
}

func (sp *splitter) push(s string) {
	if sp.depth < maxNesting {
		sp.frames[sp.depth] = frame{s: s}
		sp.depth++
	}
}

func (sp *splitter) next() (subCmd, bool) {
	for sp.depth > 0 {
		f := &sp.frames[sp.depth-1]
		if f.i >= len(f.s) {
			sp.depth--
			continue
		}
		part, unsafe := sp.scan(f)
		text := trimCommand(part)
		if text == "" {
			continue
		}
		core, env := stripWrappers(text)
		return subCmd{text: text, core: core, env: env, unsafe: unsafe}, true
	}
	return subCmd{}, false
}

// scan reads one part of the frame and advances it past the separator.
// Substitutions found on the way are pushed as frames of their own.
func (sp *splitter) scan(f *frame) (string, bool) {
	s, start := f.s, f.i
	end, next := len(s), len(s)
	unsafe := false
	inS, inD := false, false
	// Pushing changes sp.frames, so note inner commands and push them last.
	var inner [maxNesting]string
	nInner := 0
	sub := func(open, close int) {
		unsafe = true
		if nInner < len(inner) {
			inner[nInner] = s[open:close]
			nInner++
		}
	}
scan:
	for i := start; i < len(s); i++ {
		c := s[i]
		if inS {
			inS = c != '\''
			continue
		}
		if c == '\\' {
			i++
			continue
		}
		if c == '`' {
			j := closeBacktick(s, i+1)
			sub(i+1, j)
			i = j
			continue
		}
		if (c == '$' || c == '<' || c == '>') && i+1 < len(s) && s[i+1] == '(' {
			j := closeParen(s, i+2)
			sub(i+2, j)
			i = j
			continue
		}
		if inD {
			inD = c != '"'
			continue
		}
		switch c {
		case '\'':
			inS = true
		case '"':
			inD = true
		case '<':
			if i+1 < len(s) && s[i+1] == '&' {
				i++
			}
		case '>':
			var toFile bool
			i, toFile = redirect(s, i)
			unsafe = unsafe || toFile
		case ';', '\n':
			end, next = i, i+1
			break scan
		case '|':
			end, next = i, i+1
			if i+1 < len(s) && (s[i+1] == '|' || s[i+1] == '&') {
				next++
			}
			break scan
		case '&':
			if i+1 < len(s) && s[i+1] == '>' { // &> and &>> redirect stdout and stderr
				var toFile bool
				i, toFile = redirect(s, i+1)
				unsafe = unsafe || toFile
				continue
			}
			end, next = i, i+1
			if i+1 < len(s) && s[i+1] == '&' {
				next++
			}
			break scan
		}
	}
	f.i = next
	for k := range nInner {
		sp.push(inner[k])
	}
	return s[start:end], unsafe
}

// closeParen returns the index of the ')' that closes a "(" opened just
// before s[i], or len(s).
func closeParen(s string, i int) int {
	depth := 1
	inS, inD := false, false
	for ; i < len(s); i++ {
		c := s[i]
		switch {
		case inS:
			inS = c != '\''
		case c == '\\':
			i++
		case inD:
			inD = c != '"'
		case c == '\'':
			inS = true
		case c == '"':
			inD = true
		case c == '(':
			depth++
		case c == ')':
			if depth--; depth == 0 {
				return i
			}
		}
	}
	return len(s)
}

// closeBacktick returns the index of the backtick that closes one opened
// just before s[i], or len(s).
func closeBacktick(s string, i int) int {
	for ; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '`':
			return i
		}
	}
	return len(s)
}

// redirect reads the output redirection whose '>' is at s[i]. It returns the
// index of the operator's last byte and whether output goes to a file:
// duplicating a descriptor (2>&1, >&2, >&-) and /dev/null do not count.
func redirect(s string, i int) (int, bool) {
	j := i + 1
	if j < len(s) && s[j] == '(' { // process substitution >(...)
		return i, true
	}
	if j < len(s) && (s[j] == '>' || s[j] == '|') {
		j++
	}
	last := j - 1
	if j < len(s) && s[j] == '&' {
		k := j + 1
		for k < len(s) && (s[k] >= '0' && s[k] <= '9' || s[k] == '-') {
			k++
		}
		if k > j+1 && (k == len(s) || endsWord(s[k])) {
			return k - 1, false
		}
		j++ // >&file writes to file
		last = j - 1
	}
	for j < len(s) && (s[j] == ' ' || s[j] == '\t') {
		j++
	}
	const devNull = "/dev/null"
	if strings.HasPrefix(s[j:], devNull) && (j+len(devNull) == len(s) || endsWord(s[j+len(devNull)])) {
		return last, false
	}
	return last, true
}

func endsWord(c byte) bool {
	return isSpace(c) || c == ';' || c == '&' || c == '|' || c == ')'
}

// trimCommand trims whitespace, grouping and keywords that only introduce a
// command, so "(cd x", "do rm y" and "then make" compare as "cd x", "rm y"
// and "make". Parts that are only a closing keyword become "".
func trimCommand(s string) string {
	for {
		s = strings.TrimSpace(s)
		switch {
		case s == "":
			return ""
		case s[0] == '(' || s[0] == '!' && len(s) > 1 && isSpace(s[1]):
			s = s[1:]
			continue
		case s[0] == '{' && len(s) > 1 && isSpace(s[1]):
			s = s[1:]
			continue
		}
		w := firstWord(s)
		switch w {
		case "then", "do", "else", "elif", "if", "while", "until":
			s = s[len(w):]
			continue
		case "fi", "done", "esac", "}", ")":
			if len(w) == len(s) {
				return ""
			}
		}
		break
	}
	// Drop closing parentheses that close a group opened in an earlier part.
	for strings.HasSuffix(s, ")") && strings.Count(s, ")") > strings.Count(s, "(") {
		s = strings.TrimSpace(s[:len(s)-1])
	}
	return s
}

// stripWrappers drops leading VAR=value assignments and the wrappers timeout,
// nice, nohup and time (with their options), which run the command that
// follows them.
func stripWrappers(s string) (core string, env bool) {
	for {
		w, rest := shellWord(s)
		switch {
		case w == "":
			return s, env
		case isAssignment(w):
			env = true
		case w == "nohup":
		case w == "time":
			rest = skipOptions(rest, "")
		case w == "nice":
			rest = skipOptions(rest, "n")
		case w == "timeout":
			rest = skipOptions(rest, "sk")
			_, rest = shellWord(rest) // the duration
		default:
			return s, env
		}
		if rest == "" {
			return s, env // a bare wrapper is the command itself
		}
		s = rest
	}
}

// skipOptions skips leading words that start with '-'; a short option listed
// in withArg (or its long form without "=") also consumes the next word.
func skipOptions(s, withArg string) string {
	for {
		w, rest := shellWord(s)
		if len(w) < 2 || w[0] != '-' {
			return s
		}
		s = rest
		takesArg := len(w) == 2 && strings.IndexByte(withArg, w[1]) >= 0 ||
			strings.HasPrefix(w, "--") && !strings.Contains(w, "=") && w != "--" &&
				(w == "--signal" || w == "--kill-after" || w == "--adjustment")
		if takesArg {
			_, s = shellWord(s)
		}
	}
}

// shellWord returns the first word of s (quotes kept, whitespace inside quotes
// included) and the trimmed rest.
func shellWord(s string) (word, rest string) {
	s = strings.TrimLeft(s, " \t")
	inS, inD := false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case inS:
			inS = c != '\''
		case c == '\\':
			i++
		case inD:
			inD = c != '"'
		case c == '\'':
			inS = true
		case c == '"':
			inD = true
		case isSpace(c):
			return s[:i], strings.TrimLeft(s[i:], " \t\r\n")
		}
	}
	return s, ""
}

// isAssignment reports whether w is NAME=value.
func isAssignment(w string) bool {
	eq := strings.IndexByte(w, '=')
	if eq <= 0 {
		return false
	}
	for i := 0; i < eq; i++ {
		c := w[i]
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}
