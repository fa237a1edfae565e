package callpark

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
)

// fakeParker records what it is handed.
type fakeParker struct {
	http.ResponseWriter
	parked bool
	later  []func()
}

func (p *fakeParker) Park() func(bool) {
	if p.parked {
		return nil
	}
	p.parked = true
	return func(bool) {
		for _, f := range p.later {
			f()
		}
	}
}

func (p *fakeParker) Then(f func()) bool {
	if !p.parked {
		return false
	}
	p.later = append(p.later, f)
	return true
}

// wrapper wraps a ResponseWriter as the relay's layers do.
type wrapper struct{ http.ResponseWriter }

func (w wrapper) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// notifier calls back when asked, unless it is readable.
type notifier struct{ readable bool }

func (n notifier) Notify(func()) bool { return !n.readable }

func TestNotifyVia(t *testing.T) {
	tests := []struct {
		name string
		r    any
		want bool
	}{
		{"a body that can call back", notifier{}, true},
		{"a body readable now", notifier{readable: true}, false},
		{"a body that cannot call back", struct{}{}, false},
	}
	for _, tt := range tests {
		if got := NotifyVia(tt.r, func() {}); got != tt.want {
			t.Errorf("%s: NotifyVia = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestThen(t *testing.T) {
	tests := []struct {
		name     string
		park     bool // the call was parked
		wrapped  bool // the layer sees a wrapper of the Parker
		parker   bool // the server offers a Parker at all
		wantNow  bool // Then runs its work at once
		wantLate bool // ... or at the parked call's end
	}{
		{name: "a server without parking (net/http)", wantNow: true},
		{name: "not parked", parker: true, wantNow: true},
		{name: "parked", parker: true, park: true, wantLate: true},
		{name: "parked, through a wrapper", parker: true, park: true, wrapped: true, wantLate: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var w http.ResponseWriter = httptest.NewRecorder()
			var p *fakeParker
			if tt.parker {
				p = &fakeParker{ResponseWriter: w}
				w = p
			}
			var end func(bool)
			if tt.park {
				end = Find(w).Park()
			}
			if tt.wrapped {
				w = wrapper{w}
			}
			if (Find(w) != nil) != tt.parker {
				t.Fatalf("Find found a Parker: %v, want %v", Find(w) != nil, tt.parker)
			}
			var ran []string
			Then(w, func() { ran = append(ran, "first") })
			Then(w, func() { ran = append(ran, "second") })
			if got := len(ran) == 2; got != tt.wantNow {
				t.Fatalf("work run at once: %v, want %v", got, tt.wantNow)
			}
			if end != nil {
				end(false)
			}
			if tt.wantLate && !slices.Equal(ran, []string{"first", "second"}) {
				t.Fatalf("at the end ran %q, want first then second", ran)
			}
		})
	}
}
