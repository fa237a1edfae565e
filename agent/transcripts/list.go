package transcripts

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
)

// ErrNotFound is returned by Find when no transcript has the session id.
var ErrNotFound = errors.New("claude code session not found")

// Info describes one Claude Code session found on disk.
type Info struct {
	SessionID        string
	WorkingDirectory string // "cwd" of its first message
	Path             string // the transcript file
	UpdatedAt        time.Time
	// MessageCount counts user prompts and assistant API messages of the
	// main conversation (not tool results, subagents or CLI bookkeeping).
	MessageCount       int
	FirstPrompt        string // shortened to PromptPreviewRunes
	LastMessagePreview string // last prompt or assistant text, shortened
}

func (s *summary) info(id, path string, mod time.Time) Info {
	return Info{
		SessionID:          id,
		WorkingDirectory:   s.cwd,
		Path:               path,
		UpdatedAt:          mod,
		MessageCount:       s.count,
		FirstPrompt:        s.firstPrompt,
		LastMessagePreview: s.lastPreview,
	}
}

// ProjectsDir is where the CLI keeps transcripts under a HOME.
func ProjectsDir(home string) string { return filepath.Join(home, ".claude", "projects") }

// ProjectKey is the name of the folder the CLI keeps a working directory's
// transcripts in: the absolute path with every character outside
// [A-Za-z0-9] replaced by '-'.
func ProjectKey(dir string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '-'
	}, dir)
}

// List returns the sessions under home, newest first, with a fresh Lister
// (see the package doc for what that costs).
func List(home, filter string) ([]Info, error) {
	return (&Lister{Home: home}).List(filter)
}

// Find returns the session with the given id, with a fresh Lister.
func Find(home, sessionID string) (Info, error) {
	return (&Lister{Home: home}).Find(sessionID)
}

// Lister lists the transcripts under one HOME and remembers how far it read
// each, so that listing again reads only what was appended. It is safe for
// concurrent use.
type Lister struct {
	Home string
	Log  *slog.Logger // nil: slog.Default()

	mu    sync.Mutex
	cache map[string]cached // by path
}

type cached struct {
	size int64
	mod  time.Time
	sum  summary
}

func (l *Lister) log() *slog.Logger {
	if l.Log == nil {
		return slog.Default()
	}
	return l.Log
}

// List returns the sessions with at least one message, newest first. With a
// non-empty filter only the sessions whose working directory is filter are
// returned. Files that cannot be read or hold no entry at all are skipped
// with a warning; only an unreadable projects folder fails the listing.
func (l *Lister) List(filter string) ([]Info, error) {
	root := ProjectsDir(l.Home)
	var dirs []string
	if filter != "" {
		filter = filepath.Clean(filter)
		dirs = []string{filepath.Join(root, ProjectKey(filter))}
	} else {
		ents, err := os.ReadDir(root)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("list claude projects: %w", err)
		}
		for _, e := range ents {
			if e.IsDir() {
				dirs = append(dirs, filepath.Join(root, e.Name()))
			}
		}
	}
	var out []Info
	skipped := 0
	for _, dir := range dirs {
		ents, err := os.ReadDir(dir)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				skipped++
				l.log().Warn("transcripts: skipping unreadable project folder", "dir", dir, "err", err)
			}
			continue
		}
		for _, e := range ents {
			id, ok := sessionFile(e)
			if !ok {
				continue
			}
			info, err := l.info(id, filepath.Join(dir, e.Name()))
			if err != nil {
				skipped++
				l.log().Warn("transcripts: skipping transcript", "path", filepath.Join(dir, e.Name()), "err", err)
				continue
			}
			if info.MessageCount == 0 || (filter != "" && info.WorkingDirectory != filter) {
				continue
			}
			out = append(out, info)
		}
	}
	if skipped > 0 {
		l.log().Warn("transcripts: some sessions were left out of the listing", "skipped", skipped)
	}
	slices.SortFunc(out, func(a, b Info) int {
		if c := b.UpdatedAt.Compare(a.UpdatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.SessionID, b.SessionID)
	})
	return out, nil
}

// Find returns the session with the given id. It wraps ErrNotFound when no
// transcript has that id or the transcript holds no message (the CLI could
// not resume it).
func (l *Lister) Find(sessionID string) (Info, error) {
	if _, err := uuid.Parse(sessionID); err != nil {
		return Info{}, fmt.Errorf("%w: %q is not a session id", ErrNotFound, sessionID)
	}
	paths, err := filepath.Glob(filepath.Join(ProjectsDir(l.Home), "*", sessionID+".jsonl"))
	if err != nil {
		return Info{}, fmt.Errorf("find session %s: %w", sessionID, err)
	}
	var best Info
	found := false
	for _, p := range paths {
		info, err := l.info(sessionID, p)
		if err != nil {
			l.log().Warn("transcripts: skipping transcript", "path", p, "err", err)
			continue
		}
		// The same id in two project folders: the CLI resumes
		// whichever; report the one written last.
		if info.MessageCount > 0 && (!found || info.UpdatedAt.After(best.UpdatedAt)) {
			best, found = info, true
		}
	}
	if !found {
		return Info{}, fmt.Errorf("%w: %s", ErrNotFound, sessionID)
	}
	return best, nil
}

// sessionFile reports whether e is a session transcript, <uuid>.jsonl, and
// returns the id.
func sessionFile(e fs.DirEntry) (string, bool) {
	id, ok := strings.CutSuffix(e.Name(), ".jsonl")
	if !ok || e.IsDir() {
		return "", false
	}
	if _, err := uuid.Parse(id); err != nil {
		return "", false
	}
	return id, true
}

// info scans the transcript at path, resuming where the last scan of the
// same file stopped when the file only grew.
func (l *Lister) info(id, path string) (Info, error) {
	f, err := os.Open(path)
	if err != nil {
		return Info{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return Info{}, err
	}
	if !fi.Mode().IsRegular() {
		return Info{}, errors.New("not a regular file")
	}
	l.mu.Lock()
	c, ok := l.cache[path]
	l.mu.Unlock()
	switch {
	case ok && c.size == fi.Size() && c.mod.Equal(fi.ModTime()):
		return c.sum.info(id, path, fi.ModTime()), nil
	case ok && fi.Size() >= c.sum.offset:
		if _, err := f.Seek(c.sum.offset, io.SeekStart); err != nil {
			return Info{}, err
		}
	default:
		c = cached{}
	}
	sum, err := scan(f, c.sum)
	if err != nil {
		return Info{}, err
	}
	if sum.count == 0 && sum.badLines > 0 {
		return Info{}, fmt.Errorf("no conversation in the file, %d undecodable lines", sum.badLines)
	}
	l.mu.Lock()
	if l.cache == nil {
		l.cache = map[string]cached{}
	}
	l.cache[path] = cached{size: fi.Size(), mod: fi.ModTime(), sum: sum}
	l.mu.Unlock()
	return sum.info(id, path, fi.ModTime()), nil
}

var (
	userMarker      = []byte(`"type":"user"`)
	assistantMarker = []byte(`"type":"assistant"`)
)

// scan continues sum over the lines of r (positioned at sum.offset). A
// last line without a newline is left for the next scan: the CLI may be
// writing it.
func scan(r io.Reader, sum summary) (summary, error) {
	lr := newLineReader(r, sum.offset)
	for {
		line, err := lr.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return summary{}, err
		}
		if !lr.complete {
			break
		}
		sum.offset = lr.offset
		if len(line) == 0 {
			continue
		}
		if line[0] != '{' {
			sum.badLines++
			continue
		}
		// The CLI writes compact JSON, so every user and assistant entry
		// holds one of these; the many other (and often large) lines are
		// never parsed.
		if !bytes.Contains(line, userMarker) && !bytes.Contains(line, assistantMarker) {
			continue
		}
		e, err := decodeEntry(line)
		if err != nil {
			sum.badLines++
			continue
		}
		sum.add(e, e.blocks())
	}
	sum.badLines += lr.tooLong
	return sum, nil
}
