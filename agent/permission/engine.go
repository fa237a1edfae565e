package permission

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
)

// Options configure an Engine.
type Options struct {
	// Home is the user's home directory, for "~/" patterns. Empty: such
	// patterns never match. The engine makes no os calls to find it.
	Home string
	// Default is the behavior when no rule matches: Ask (the zero value),
	// Allow or Deny.
	Default Behavior
}

// Validate reports options the engine cannot use.
func (o Options) Validate() error {
	if !o.Default.valid() {
		return fmt.Errorf("permission options: default behavior %v", o.Default)
	}
	if o.Home != "" && !path.IsAbs(o.Home) {
		return fmt.Errorf("permission options: home %q is not absolute", o.Home)
	}
	return nil
}

// Request is one tool call to decide.
type Request struct {
	Tool  string         // "Bash", "Read", "mcp__github__create_issue", ...
	Input map[string]any // the tool's JSON input
	Cwd   string         // the session's absolute working directory
}

// Decision is the engine's answer.
type Decision struct {
	Behavior Behavior
	// Rule is the rule that decided, nil when the default did. It points
	// into the engine; do not modify it.
	Rule   *Rule
	Reason string
}

// Reasons a Decision gives; constant so that Decide does not allocate.
const (
	ReasonRule        = "matched a rule"
	ReasonSubcommand  = "a sub-command of the Bash command matched a rule"
	ReasonAllAllowed  = "every sub-command of the Bash command matched an allow rule"
	ReasonDefault     = "no rule matched; default behavior"
	ReasonUnmatchedSC = "a sub-command of the Bash command matched no rule; default behavior"
)

// bucket indexes: rules are tried deny first, then ask, then allow.
const (
	bDeny = iota
	bAsk
	bAllow
)

func bucketOf(b Behavior) int {
	switch b {
	case Deny:
		return bDeny
	case Allow:
		return bAllow
	}
	return bAsk
}

var bucketBehavior = [3]Behavior{Deny, Ask, Allow}

// Engine decides tool calls against a fixed set of rules. It is immutable
// and safe for concurrent use.
type Engine struct {
	rules    []Rule
	opts     Options
	byName   map[string]*toolIndex
	fallback toolIndex // rules naming tools by prefix or "*", for other tools
}

// toolIndex holds the rules that can apply to one tool name, by bucket.
type toolIndex struct {
	check  bool                   // the tool matcher must be checked per rule
	whole  [3][]*Rule             // rules on the whole call: no specifier, path, domain, ccgrid
	byWord map[string]*[3][]*Rule // Bash rules by their literal first word
	cmdAny [3][]*Rule             // Bash rules whose first word has a wildcard
}

func (x *toolIndex) add(r *Rule) {
	bi := bucketOf(r.Behavior)
	if r.m.kind != specCommand {
		x.whole[bi] = append(x.whole[bi], r)
		return
	}
	w := r.m.cmd.word
	if w == "" {
		x.cmdAny[bi] = append(x.cmdAny[bi], r)
		return
	}
	if x.byWord == nil {
		x.byWord = make(map[string]*[3][]*Rule)
	}
	lists := x.byWord[w]
	if lists == nil {
		lists = new([3][]*Rule)
		x.byWord[w] = lists
	}
	lists[bi] = append(lists[bi], r)
}

// New compiles an engine. Rules built by ParseRule, CCGridRule and GrantFor
// are used as they are; a Rule built by hand is parsed from its Tool and
// Pattern in Claude syntax.
func New(rules []Rule, opts Options) (*Engine, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if opts.Home != "" {
		opts.Home = path.Clean(opts.Home)
	}
	e := &Engine{rules: slices.Clone(rules), opts: opts, byName: make(map[string]*toolIndex)}
	var errs []error
	for i := range e.rules {
		r := &e.rules[i]
		if r.m != nil {
			continue
		}
		c, err := ParseRule(r.String(), r.Behavior)
		if err != nil {
			errs = append(errs, fmt.Errorf("rule %d (%s): %w", i, r.Source, err))
			continue
		}
		r.m = c.m
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	e.fallback.check = true
	names := map[string]bool{}
	for i := range e.rules {
		r := &e.rules[i]
		if r.m.tool.kind != toolExact {
			e.fallback.add(r)
			continue
		}
		names[r.m.tool.name] = true
		for _, f := range r.m.tool.family {
			names[f] = true
		}
	}
	for name := range names {
		x := &toolIndex{}
		for i := range e.rules {
			if r := &e.rules[i]; r.m.tool.matches(name) {
				x.add(r)
			}
		}
		e.byName[name] = x
	}
	return e, nil
}

// With returns a new engine with more rules, such as session grants, and the
// same options.
func (e *Engine) With(more ...Rule) (*Engine, error) {
	return New(append(slices.Clone(e.rules), more...), e.opts)
}

// Rules returns a copy of the engine's rules.
func (e *Engine) Rules() []Rule { return slices.Clone(e.rules) }

// Decide decides one tool call. Deny rules win over allow rules and allow
// rules over ask rules (the order BetCode's spec sets); with no match the
// default applies.
func (e *Engine) Decide(req Request) Decision {
	x := e.byName[req.Tool]
	if x == nil {
		x = &e.fallback
	}
	c := call{tool: req.Tool, input: req.Input, cwd: cleanDir(req.Cwd), home: e.opts.Home}
	if req.Tool == "Bash" {
		return e.decideBash(x, &c)
	}
	for _, bi := range [3]int{bDeny, bAllow, bAsk} {
		if r := c.firstWhole(x, bi); r != nil {
			return Decision{Behavior: bucketBehavior[bi], Rule: r, Reason: ReasonRule}
		}
	}
	return Decision{Behavior: e.opts.Default, Reason: ReasonDefault}
}

// call is a request being decided, with the facts rules look at computed
// at most once.
type call struct {
	tool, cwd, home string
	input           map[string]any

	pathDone, hasPath bool
	path              string
	hostDone          bool
	host              string
}

func (c *call) firstWhole(x *toolIndex, bi int) *Rule {
	for _, r := range x.whole[bi] {
		if x.check && !r.m.tool.matches(c.tool) {
			continue
		}
		if c.matches(r.m) {
			return r
		}
	}
	return nil
}

func (c *call) matches(m *matcher) bool {
	switch m.kind {
	case specNone:
		return true
	case specPath, specCCGrid:
		if !c.pathDone {
			c.path, c.hasPath = pathOf(c.tool, c.input, c.cwd)
			c.pathDone = true
		}
		return c.hasPath && m.path.match(c.path, c.cwd, c.home)
	case specDomain:
		if !c.hostDone {
			c.host, c.hostDone = hostOf(str(c.input, "url")), true
		}
		h := c.host
		if m.sub {
			// *.example.com: any subdomain, not example.com itself.
			if len(h) <= len(m.domain)+1 || h[len(h)-len(m.domain)-1] != '.' {
				return false
			}
			h = h[len(h)-len(m.domain):]
		}
		return strings.EqualFold(h, m.domain)
	}
	return false
}

// decideBash splits the command into sub-commands and decides each: a deny
// on any part denies the call; a part an allow rule matches is allowed (allow
// wins over ask); the call asks when a part only an ask rule matches, and is
// allowed when every part is. Parts no rule matches take the default.
func (e *Engine) decideBash(x *toolIndex, c *call) Decision {
	if r := c.firstWhole(x, bDeny); r != nil {
		return Decision{Behavior: Deny, Rule: r, Reason: ReasonRule}
	}
	allowRule := c.firstWhole(x, bAllow)
	wholeAllow := allowRule != nil
	var askRule *Rule
	if !wholeAllow {
		askRule = c.firstWhole(x, bAsk)
	}

	cmd := strings.TrimSpace(str(c.input, "command"))
	unmatched, n := false, 0
	asIs := true // the command is one part, matched as written
	sp := newSplitter(cmd)
	for sub, ok := sp.next(); ok; sub, ok = sp.next() {
		n++
		asIs = asIs && sub.text == cmd
		f := x.forms(sub)
		if r := x.matchSub(bDeny, &f); r != nil {
			return Decision{Behavior: Deny, Rule: r, Reason: ReasonSubcommand}
		}
		if r := x.matchSub(bAllow, &f); r != nil {
			if allowRule == nil {
				allowRule = r
			}
			continue
		}
		if r := x.matchSub(bAsk, &f); r != nil {
			if askRule == nil {
				askRule = r
			}
			continue
		}
		unmatched = true
	}
	if n == 0 {
		unmatched = true
	}
	// An exact rule may name the whole command as written, as a session
	// grant for a compound command does.
	if n != 1 || !asIs {
		var lists *[3][]*Rule
		if x.byWord != nil {
			lists = x.byWord[firstWord(cmd)]
		}
		if r := x.exact(lists, bDeny, cmd); r != nil {
			return Decision{Behavior: Deny, Rule: r, Reason: ReasonRule}
		}
		if r := x.exact(lists, bAsk, cmd); r != nil && askRule == nil {
			askRule = r
		}
		if r := x.exact(lists, bAllow, cmd); r != nil && !wholeAllow {
			allowRule, wholeAllow = r, true
		}
	}
	switch {
	case wholeAllow:
		return Decision{Behavior: Allow, Rule: allowRule, Reason: ReasonRule}
	case unmatched && e.opts.Default == Deny:
		return Decision{Behavior: Deny, Reason: ReasonUnmatchedSC}
	case askRule != nil:
		return Decision{Behavior: Ask, Rule: askRule, Reason: ReasonSubcommand}
	case unmatched && n <= 1:
		return Decision{Behavior: e.opts.Default, Reason: ReasonDefault}
	case unmatched:
		return Decision{Behavior: e.opts.Default, Reason: ReasonUnmatchedSC}
	case n > 1:
		return Decision{Behavior: Allow, Rule: allowRule, Reason: ReasonAllAllowed}
	}
	return Decision{Behavior: Allow, Rule: allowRule, Reason: ReasonRule}
}

// exact returns the first wildcard-free command rule of the bucket that
// matches the whole command, from its first-word list or the unindexed ones.
func (x *toolIndex) exact(lists *[3][]*Rule, bi int, cmd string) *Rule {
	var rules []*Rule
	if lists != nil {
		rules = lists[bi]
	}
	for _, list := range [2][]*Rule{rules, x.cmdAny[bi]} {
		for _, r := range list {
			if !r.m.cmd.wildcard && r.m.cmd.match(cmd) {
				return r
			}
		}
	}
	return nil
}

// matchSub returns the first rule of the bucket matching the sub-command as
// written or without its wrappers. Allow rules skip the unwrapped form when
// that drops VAR=value assignments (LD_PRELOAD=x git is not git), and
// wildcard allow rules skip parts that are unsafe.
func (x *toolIndex) matchSub(bi int, f *forms) *Rule {
	if r := x.matchForm(bi, f.sub.text, f.textRules, f.sub.unsafe); r != nil {
		return r
	}
	if f.sub.core != f.sub.text && (bi != bAllow || !f.sub.env) {
		return x.matchForm(bi, f.sub.core, f.coreRules, f.sub.unsafe)
	}
	return nil
}

// forms is a sub-command with the indexed rules for its two forms, looked
// up once for all three buckets.
type forms struct {
	sub                  subCmd
	textRules, coreRules *[3][]*Rule
}

func (x *toolIndex) forms(sub subCmd) forms {
	f := forms{sub: sub}
	if x.byWord != nil {
		f.textRules = x.byWord[firstWord(sub.text)]
		if sub.core != sub.text {
			f.coreRules = x.byWord[firstWord(sub.core)]
		}
	}
	return f
}

func (x *toolIndex) matchForm(bi int, s string, lists *[3][]*Rule, unsafe bool) *Rule {
	var indexed []*Rule
	if lists != nil {
		indexed = lists[bi]
	}
	for _, list := range [2][]*Rule{indexed, x.cmdAny[bi]} {
		for _, r := range list {
			if unsafe && bi == bAllow && r.m.cmd.wildcard {
				continue
			}
			if r.m.cmd.match(s) {
				return r
			}
		}
	}
	return nil
}
