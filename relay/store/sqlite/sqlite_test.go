package sqlite_test

import (
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/betcode-dev/betcode/relay/store"
	"github.com/betcode-dev/betcode/relay/store/sqlite"
	"github.com/betcode-dev/betcode/relay/store/storetest"
)

// newDB gives each test its own file.
func newDB(tb testing.TB) storetest.Open {
	path := filepath.Join(tb.TempDir(), "relay.db")
	return func(tb testing.TB) store.Store {
		s, err := sqlite.Open(tb.Context(), path, sqlite.Options{Logger: slog.New(slog.NewTextHandler(tbWriter{tb}, nil))})
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { _ = s.Close() })
		return s
	}
}

type tbWriter struct{ tb testing.TB }

func (w tbWriter) Write(p []byte) (int, error) { w.tb.Log(string(p)); return len(p), nil }

func TestStore(t *testing.T) { storetest.Run(t, newDB) }

func BenchmarkEnqueue(b *testing.B) {
	b.Run("machines=1", func(b *testing.B) { storetest.BenchEnqueue(b, newDB(b), 1) })
	b.Run("machines=1000", func(b *testing.B) { storetest.BenchEnqueue(b, newDB(b), 1000) })
}

func BenchmarkDeliver(b *testing.B) {
	storetest.BenchDeliver(b, newDB(b))
}
