package workspace

import (
	"slices"
	"testing"
)

func TestParseStatus(t *testing.T) {
	out := "# branch.oid (initial)\x00# branch.head feature/x\x00# branch.upstream origin/x\x00" +
		"1 .M N... 100644 100644 100644 abc abc a file with spaces\x00" +
		"2 R. N... 100644 100644 100644 abc abc R100 new name\x00old name\x00" +
		"u UU N... 100644 100644 100644 100644 a b c conflict\x00" +
		"? untracked\x00! ignored\x00" +
		"9 from a newer git\x00"
	st, err := parseStatus([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	want := []statusEntry{
		{Kind: '1', XY: ".M", Path: "a file with spaces"},
		{Kind: '2', XY: "R.", Path: "new name", OrigPath: "old name"},
		{Kind: 'u', XY: "UU", Path: "conflict"},
		{Kind: '?', XY: "??", Path: "untracked"},
	}
	if !st.Initial || st.Branch != "feature/x" || !slices.Equal(st.Entries, want) {
		t.Fatalf("parsed %+v", st)
	}
	detached, err := parseStatus([]byte("# branch.oid 0123\x00# branch.head (detached)\x00"))
	if err != nil || detached.Branch != "" || detached.Initial {
		t.Fatalf("detached: %+v, %v", detached, err)
	}
	for _, bad := range []string{"1 .M short\x00", "2 R. N... 1 1 1 a a R100 new\x00", "u UU x\x00", "?\x00"} {
		if _, err := parseStatus([]byte(bad)); err == nil {
			t.Errorf("parseStatus(%q) accepted it", bad)
		}
	}
}

func TestParseNumstat(t *testing.T) {
	got, err := parseNumstat([]byte("3\t1\ta.txt\x00-\t-\timg.png\x005\t0\t\x00old\x00new\x00"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]numstat{"a.txt": {Added: 3, Deleted: 1}, "img.png": {Binary: true}, "new": {Added: 5}}
	if len(got) != len(want) {
		t.Fatalf("got %v", got)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("%s = %+v, want %+v", k, got[k], v)
		}
	}
	for _, bad := range []string{"3\ta.txt\x00", "x\t1\ta\x00", "1\t1\t\x00old\x00"} {
		if _, err := parseNumstat([]byte(bad)); err == nil {
			t.Errorf("parseNumstat(%q) accepted it", bad)
		}
	}
}

func FuzzParseStatus(f *testing.F) {
	f.Add([]byte("# branch.oid (initial)\x00# branch.head main\x001 .M N... 100644 100644 100644 abc abc a b\x00"))
	f.Add([]byte("2 R. N... 100644 100644 100644 abc abc R100 new\x00old\x00? u\x00"))
	f.Add([]byte("u UU N... 1 1 1 1 a b c p\x00"))
	f.Fuzz(func(t *testing.T, out []byte) {
		st, err := parseStatus(out)
		if err != nil {
			return
		}
		for _, e := range st.Entries {
			if len(e.XY) != 2 {
				t.Fatalf("entry %+v", e)
			}
			_ = fileChange(e)
		}
	})
}

func FuzzParseNumstat(f *testing.F) {
	f.Add([]byte("3\t1\ta.txt\x00-\t-\timg.png\x005\t0\t\x00old\x00new\x00"))
	f.Fuzz(func(t *testing.T, out []byte) {
		_, _ = parseNumstat(out)
	})
}
