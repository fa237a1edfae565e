package permission

import (
	"errors"
	"strings"
)

// starTok stands for an unescaped '*' in a compiled command pattern; every
// other token is a byte.
const starTok = 0x100

// cmdPattern is a compiled Bash(...) specifier.
//
// Whitespace runs in the pattern and in the command compare as one space, so
// "git  status" matches Bash(git status). A trailing " *" or ":*" is a prefix
// with a word boundary: Bash(ls *) and Bash(ls:*) match "ls" and "ls -la" but
// not "lsof". A '*' anywhere else matches any run of characters, spaces
// included; "\*" is a literal star.
type cmdPattern struct {
	toks     []uint16 // body, then " *" when optTail is set
	bodyLen  int      // tokens of the body alone
	optTail  bool
	wildcard bool   // any star, so not an exact command
	word     string // literal first word, "" when it holds a star
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func compileCommand(spec string) (cmdPattern, error) {
	s := strings.TrimSpace(spec)
	if s == "" {
		return cmdPattern{}, errors.New("empty command pattern")
	}
	var p cmdPattern
	switch {
	case strings.HasSuffix(s, ":*"):
		s, p.optTail = strings.TrimSpace(s[:len(s)-2]), true
	case len(s) >= 2 && s[len(s)-1] == '*' && isSpace(s[len(s)-2]):
		s, p.optTail = strings.TrimSpace(s[:len(s)-1]), true
	}
	if s == "" {
		return cmdPattern{}, errors.New("empty command prefix before the trailing wildcard")
	}
	wordDone, wordStar := false, false
	wordEnd := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case isSpace(c):
			for i+1 < len(s) && isSpace(s[i+1]) {
				i++
			}
			p.toks = append(p.toks, ' ')
			if !wordDone {
				wordDone, wordEnd = true, i
			}
		case c == '\\' && i+1 < len(s) && s[i+1] == '*':
			p.toks = append(p.toks, '*')
			i++
			if !wordDone {
				wordStar = true // keep the index simple: escaped stars are rare
			}
		case c == '*':
			p.toks = append(p.toks, starTok)
			p.wildcard = true
			if !wordDone {
				wordStar = true
			}
		default:
			p.toks = append(p.toks, uint16(c))
		}
	}
	if !wordDone {
		wordEnd = len(s)
	}
	if !wordStar {
		p.word = firstWord(s[:wordEnd])
	}
	p.bodyLen = len(p.toks)
	if p.optTail {
		p.toks = append(p.toks, ' ', starTok)
		p.wildcard = true
	}
	if p.wildcard {
		n := 0
		sp := newSplitter(spec)
		for _, ok := sp.next(); ok; _, ok = sp.next() {
			n++
		}
		if n > 1 {
			return cmdPattern{}, errors.New("a wildcard command pattern with a shell operator (&&, ||, ;, |, &, newline) or command substitution can never match: commands are split there and each part is matched alone")
		}
	}
	return p, nil
}

// match reports whether the trimmed command s matches.
func (p *cmdPattern) match(s string) bool {
	if p.optTail && globCmd(p.toks[:p.bodyLen], s) {
		return true
	}
	return globCmd(p.toks, s)
}

// nextNorm returns the byte at s[i] and the index after it, reading a run of
// whitespace as one space.
func nextNorm(s string, i int) (byte, int) {
	c := s[i]
	if !isSpace(c) {
		return c, i + 1
	}
	for i++; i < len(s) && isSpace(s[i]); i++ {
	}
	return ' ', i
}

// globCmd matches the tokens against s with the usual single-backtrack star
// algorithm: linear in practice, never exponential.
func globCmd(p []uint16, s string) bool {
	px, sx := 0, 0
	starPx, starSx := -1, 0
	for {
		if px < len(p) {
			if p[px] == starTok {
				starPx, starSx = px, sx
				px++
				continue
			}
			if sx < len(s) {
				if c, n := nextNorm(s, sx); uint16(c) == p[px] {
					px, sx = px+1, n
					continue
				}
			}
		} else if sx >= len(s) {
			return true
		}
		if starPx >= 0 && starSx < len(s) {
			_, starSx = nextNorm(s, starSx)
			px, sx = starPx+1, starSx
			continue
		}
		return false
	}
}

// firstWord returns s up to its first whitespace.
func firstWord(s string) string {
	for i := 0; i < len(s); i++ {
		if isSpace(s[i]) {
			return s[:i]
		}
	}
	return s
}
