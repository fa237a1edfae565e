package permission

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// anchor says what a path pattern is relative to.
type anchor uint8

const (
	anchorRoot anchor = iota // the filesystem root
	anchorHome               // Options.Home
	anchorCwd                // the request's working directory
)

// pathPattern is a compiled path glob: segments relative to its anchor. "*"
// and "?" and "[...]" match within one segment, "**" matches zero or more
// whole segments.
type pathPattern struct {
	anchor anchor
	segs   []segment
}

type segment struct {
	dstar bool
	lit   string // the segment when it has no glob characters
	glob  []gtok // otherwise
}

type gtokKind uint8

const (
	gLit   gtokKind = iota
	gOne            // ?
	gStar           // *
	gClass          // [...]
)

type gtok struct {
	kind gtokKind
	neg  bool
	b    byte
	set  *[4]uint64 // bytes in the class
}

// compileClaudePath compiles a Read(...)/Edit(...) specifier. Claude Code
// documents these as gitignore patterns with four anchors:
//
//	//path  absolute          ~/path  home          /path  project (cwd)
//	path, ./path  relative to the cwd; without a '/' it matches at any depth
//
// As in gitignore, a pattern that matches a directory also matches
// everything below it.
func compileClaudePath(spec string) (pathPattern, error) {
	var p pathPattern
	rest := spec
	switch {
	case strings.HasPrefix(spec, "//"):
		p.anchor, rest = anchorRoot, spec[2:]
	case spec == "~" || strings.HasPrefix(spec, "~/"):
		p.anchor, rest = anchorHome, strings.TrimPrefix(spec[1:], "/")
	case strings.HasPrefix(spec, "/"):
		p.anchor, rest = anchorCwd, spec[1:]
	case spec == "." || strings.HasPrefix(spec, "./"):
		p.anchor, rest = anchorCwd, strings.TrimPrefix(spec[1:], "/")
	default:
		p.anchor = anchorCwd
		if !strings.Contains(strings.TrimSuffix(spec, "/"), "/") {
			rest = "**/" + spec
		}
	}
	segs, err := compileSegments(rest)
	if err != nil {
		return pathPattern{}, err
	}
	if n := len(segs); n == 0 || !segs[n-1].dstar {
		segs = append(segs, segment{dstar: true})
	}
	p.segs = segs
	return p, nil
}

// compileCCGridPath compiles a ccgrid pathPattern: "/..." is absolute, "~/"
// is home, "./..." and other patterns with a '/' are relative to the cwd, a
// pattern without '/' (or one starting "**/") matches anywhere. It returns
// all=true for patterns that match every call, with a path or without.
func compileCCGridPath(spec string) (p pathPattern, all bool, err error) {
	switch spec {
	case "", "*", "**", "/**", "**/*":
		return pathPattern{}, true, nil
	}
	rest := spec
	switch {
	case strings.HasPrefix(spec, "/"):
		p.anchor, rest = anchorRoot, spec[1:]
	case spec == "~" || strings.HasPrefix(spec, "~/"):
		p.anchor, rest = anchorHome, strings.TrimPrefix(spec[1:], "/")
	case strings.HasPrefix(spec, "**/"), !strings.Contains(spec, "/"):
		p.anchor, rest = anchorRoot, "**/"+strings.TrimPrefix(spec, "**/")
	default:
		p.anchor, rest = anchorCwd, strings.TrimPrefix(spec, "./")
	}
	p.segs, err = compileSegments(rest)
	return p, false, err
}

func compileSegments(s string) ([]segment, error) {
	var segs []segment
	for part := range strings.SplitSeq(s, "/") {
		switch {
		case part == "" || part == ".":
			continue
		case part == "..":
			return nil, errors.New(`".." is not supported in a path pattern; write the absolute path as //path`)
		case part == "**":
			if len(segs) > 0 && segs[len(segs)-1].dstar {
				continue
			}
			segs = append(segs, segment{dstar: true})
		case !strings.ContainsAny(part, `*?[\`):
			segs = append(segs, segment{lit: part})
		default:
			g, err := compileGlob(part)
			if err != nil {
				return nil, err
			}
			segs = append(segs, segment{glob: g})
		}
	}
	return segs, nil
}

func compileGlob(s string) ([]gtok, error) {
	var g []gtok
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '*':
			if len(g) == 0 || g[len(g)-1].kind != gStar {
				g = append(g, gtok{kind: gStar})
			}
		case '?':
			g = append(g, gtok{kind: gOne})
		case '\\':
			if i+1 == len(s) {
				return nil, errors.New(`path pattern ends with "\"`)
			}
			i++
			g = append(g, gtok{kind: gLit, b: s[i]})
		case '[':
			t, n, err := compileClass(s[i:])
			if err != nil {
				return nil, err
			}
			g = append(g, t)
			i += n - 1
		default:
			g = append(g, gtok{kind: gLit, b: c})
		}
	}
	return g, nil
}

// compileClass compiles the class at the start of s ("[abc]", "[a-z]",
// "[!x]" or "[^x]") and returns its length.
func compileClass(s string) (gtok, int, error) {
	t := gtok{kind: gClass, set: new([4]uint64)}
	i := 1
	if i < len(s) && (s[i] == '!' || s[i] == '^') {
		t.neg = true
		i++
	}
	first := true
	for ; i < len(s); i++ {
		c := s[i]
		if c == ']' && !first {
			return t, i + 1, nil
		}
		first = false
		if c == '\\' && i+1 < len(s) {
			i++
			c = s[i]
		}
		hi := c
		if i+2 < len(s) && s[i+1] == '-' && s[i+2] != ']' {
			hi = s[i+2]
			i += 2
			if hi < c {
				return gtok{}, 0, fmt.Errorf("bad range %q in path pattern", s[i-2:i+1])
			}
		}
		for b := int(c); b <= int(hi); b++ {
			t.set[b>>6] |= 1 << (b & 63)
		}
	}
	return gtok{}, 0, fmt.Errorf("unclosed %q in path pattern", "[")
}

// match reports whether the clean absolute path p matches, with cwd and
// home clean absolute paths or "" (then patterns anchored there never match).
func (pp *pathPattern) match(p, cwd, home string) bool {
	var rest string
	var ok bool
	switch pp.anchor {
	case anchorRoot:
		rest, ok = under(p, "/")
	case anchorHome:
		rest, ok = under(p, home)
	case anchorCwd:
		rest, ok = under(p, cwd)
	}
	return ok && matchSegments(pp.segs, rest)
}

// under returns p relative to base, without a leading '/'.
func under(p, base string) (string, bool) {
	switch {
	case base == "" || len(p) < len(base) || p[:len(base)] != base:
		return "", false
	case base == "/":
		return p[1:], true
	case len(p) == len(base):
		return "", true
	case p[len(base)] != '/':
		return "", false
	}
	return p[len(base)+1:], true
}

// matchSegments matches a relative, slash-separated path. "**" is handled
// like '*' in a string glob, one segment at a time, with a single backtrack
// point: linear in the number of segments times the pattern length.
func matchSegments(segs []segment, s string) bool {
	pi, si := 0, 0
	starPi, starSi := -1, 0
	for {
		if pi < len(segs) && segs[pi].dstar {
			starPi, starSi = pi, si
			pi++
			continue
		}
		if si >= len(s) {
			if pi == len(segs) {
				return true
			}
		} else if pi < len(segs) {
			end := strings.IndexByte(s[si:], '/')
			next := len(s)
			if end < 0 {
				end = len(s)
			} else {
				end += si
				next = end + 1
			}
			if segs[pi].match(s[si:end]) {
				pi, si = pi+1, next
				continue
			}
		}
		if starPi >= 0 && starSi < len(s) {
			if end := strings.IndexByte(s[starSi:], '/'); end < 0 {
				starSi = len(s)
			} else {
				starSi += end + 1
			}
			pi, si = starPi+1, starSi
			continue
		}
		return false
	}
}

func (sg *segment) match(s string) bool {
	if sg.glob == nil {
		return sg.lit == s
	}
	return matchGlob(sg.glob, s)
}

func matchGlob(g []gtok, s string) bool {
	gi, si := 0, 0
	starGi, starSi := -1, 0
	for {
		if gi < len(g) {
			t := &g[gi]
			if t.kind == gStar {
				starGi, starSi = gi, si
				gi++
				continue
			}
			if si < len(s) {
				n := 1
				ok := false
				switch t.kind {
				case gLit:
					ok = s[si] == t.b
				case gOne:
					_, n = utf8.DecodeRuneInString(s[si:])
					ok = true
				case gClass:
					c := s[si]
					ok = (t.set[c>>6]&(1<<(c&63)) != 0) != t.neg
				}
				if ok {
					gi, si = gi+1, si+n
					continue
				}
			}
		} else if si >= len(s) {
			return true
		}
		if starGi >= 0 && starSi < len(s) {
			starSi++
			gi, si = starGi+1, starSi
			continue
		}
		return false
	}
}
