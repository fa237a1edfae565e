package team

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// newStore opens a store in a temporary directory with a fixed clock and
// ids "id-1", "id-2", ...
func newStore(t *testing.T) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), FileName)
	return openAt(t, path), path
}

func openAt(t *testing.T, path string) *Store {
	t.Helper()
	n := 0
	s, err := OpenStore(path, StoreOptions{
		Now:   func() time.Time { n++; return t0.Add(time.Duration(n) * time.Minute) },
		NewID: func() string { n++; return fmt.Sprintf("id-%d", n) },
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func internalSkill(name string) *pb.SkillSpec {
	return &pb.SkillSpec{Name: name, Description: "d", SkillType: pb.SkillType_SKILL_TYPE_INTERNAL, SkillMdContent: "# " + name}
}

func mustSkill(t *testing.T, s *Store, k *pb.SkillSpec) *pb.SkillSpec {
	t.Helper()
	out, err := s.CreateSkill(k)
	if err != nil {
		t.Fatalf("CreateSkill(%v): %v", k, err)
	}
	return out
}

func mustTeammate(t *testing.T, s *Store, spec *pb.TeammateSpec) *pb.TeammateSpec {
	t.Helper()
	out, err := s.CreateTeammate(spec)
	if err != nil {
		t.Fatalf("CreateTeammate(%v): %v", spec, err)
	}
	return out
}

// errKind names the Store error kinds for table tests.
func errKind(err error) string {
	var inv *InvalidError
	var inUse *InUseError
	switch {
	case err == nil:
		return ""
	case errors.As(err, &inv):
		return "invalid"
	case errors.As(err, &inUse):
		return "in use"
	case errors.Is(err, ErrSpecNotFound):
		return "not found"
	case errors.Is(err, ErrSpecExists):
		return "exists"
	}
	return "other: " + err.Error()
}

func TestCreateSkillValidation(t *testing.T) {
	tests := []struct {
		name string
		spec *pb.SkillSpec
		want string // errKind
	}{
		{"internal with content", internalSkill("lint"), ""},
		{"official without content", &pb.SkillSpec{Name: "web-search", SkillType: pb.SkillType_SKILL_TYPE_OFFICIAL}, ""},
		{"external with plugin", &pb.SkillSpec{Name: "pdf", SkillType: pb.SkillType_SKILL_TYPE_EXTERNAL, PluginName: "docs"}, ""},
		{"no name", &pb.SkillSpec{SkillType: pb.SkillType_SKILL_TYPE_OFFICIAL}, "invalid"},
		{"blank name", &pb.SkillSpec{Name: "  ", SkillType: pb.SkillType_SKILL_TYPE_OFFICIAL}, "invalid"},
		{"name too long", &pb.SkillSpec{Name: strings.Repeat("n", MaxName+1), SkillType: pb.SkillType_SKILL_TYPE_OFFICIAL}, "invalid"},
		{"control character in name", &pb.SkillSpec{Name: "a\nb", SkillType: pb.SkillType_SKILL_TYPE_OFFICIAL}, "invalid"},
		{"no type", &pb.SkillSpec{Name: "x"}, "invalid"},
		{"internal without content", &pb.SkillSpec{Name: "x", SkillType: pb.SkillType_SKILL_TYPE_INTERNAL}, "invalid"},
		{"content of 64 KiB", &pb.SkillSpec{Name: "x", SkillType: pb.SkillType_SKILL_TYPE_INTERNAL, SkillMdContent: strings.Repeat("c", MaxSkillContent)}, ""},
		{"content over 64 KiB", &pb.SkillSpec{Name: "x", SkillType: pb.SkillType_SKILL_TYPE_INTERNAL, SkillMdContent: strings.Repeat("c", MaxSkillContent+1)}, "invalid"},
		{"name taken", internalSkill("taken"), "exists"},
		{"name taken once trimmed", internalSkill(" taken "), "exists"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := newStore(t)
			mustSkill(t, s, internalSkill("taken"))
			got, err := s.CreateSkill(tt.spec)
			if errKind(err) != tt.want {
				t.Fatalf("CreateSkill: %v, want %q", err, tt.want)
			}
			if err == nil && (got.GetId() == "" || got.GetCreatedAt() == nil || got.GetName() != strings.TrimSpace(tt.spec.GetName())) {
				t.Fatalf("created %v", got)
			}
		})
	}
}

func TestTeammateSpecValidation(t *testing.T) {
	tests := []struct {
		name string
		spec func(skill string) *pb.TeammateSpec
		want string
	}{
		{"name only", func(string) *pb.TeammateSpec { return &pb.TeammateSpec{Name: "tester"} }, ""},
		{"with a skill", func(k string) *pb.TeammateSpec { return &pb.TeammateSpec{Name: "tester", SkillIds: []string{k}} }, ""},
		{"no name", func(string) *pb.TeammateSpec { return &pb.TeammateSpec{Role: "QA"} }, "invalid"},
		{"unknown skill", func(string) *pb.TeammateSpec { return &pb.TeammateSpec{Name: "tester", SkillIds: []string{"nope"}} }, "invalid"},
		{"name taken", func(string) *pb.TeammateSpec { return &pb.TeammateSpec{Name: "researcher"} }, "exists"},
		{"instructions too long", func(string) *pb.TeammateSpec {
			return &pb.TeammateSpec{Name: "tester", Instructions: strings.Repeat("i", MaxInstructions+1)}
		}, "invalid"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := newStore(t)
			k := mustSkill(t, s, internalSkill("lint"))
			mustTeammate(t, s, &pb.TeammateSpec{Name: "researcher"})
			_, err := s.CreateTeammate(tt.spec(k.GetId()))
			if errKind(err) != tt.want {
				t.Fatalf("CreateTeammate: %v, want %q", err, tt.want)
			}
		})
	}
}

func TestUpdateTeammate(t *testing.T) {
	base := func(k string) *pb.TeammateSpec {
		return &pb.TeammateSpec{Name: "auditor", Role: "Security", Instructions: "Find bugs.", SkillIds: []string{k}, Model: "opus"}
	}
	none := func(string) *pb.TeammateSpec { return &pb.TeammateSpec{} }
	tests := []struct {
		name   string
		change func(k string) *pb.TeammateSpec
		mask   []string
		want   func(k string) *pb.TeammateSpec // nil: want the error
		err    string
	}{
		{name: "masked field only", change: func(string) *pb.TeammateSpec { return &pb.TeammateSpec{Instructions: "OWASP Top 10.", Role: "ignored"} },
			mask: []string{"instructions"},
			want: func(k string) *pb.TeammateSpec { t := base(k); t.Instructions = "OWASP Top 10."; return t }},
		{name: "empty mask sets every field", change: func(string) *pb.TeammateSpec { return &pb.TeammateSpec{Name: "auditor2"} },
			want: func(string) *pb.TeammateSpec { return &pb.TeammateSpec{Name: "auditor2"} }},
		{name: "skill ids deduplicated", change: func(k string) *pb.TeammateSpec { return &pb.TeammateSpec{SkillIds: []string{k, k}} },
			mask: []string{"skill_ids"}, want: base},
		{name: "unknown mask field", change: none, mask: []string{"colour"}, err: "invalid"},
		{name: "name emptied", change: none, mask: []string{"name"}, err: "invalid"},
		{name: "name of another spec", change: func(string) *pb.TeammateSpec { return &pb.TeammateSpec{Name: "other"} }, mask: []string{"name"}, err: "exists"},
		{name: "unknown skill", change: func(string) *pb.TeammateSpec { return &pb.TeammateSpec{SkillIds: []string{"nope"}} }, mask: []string{"skill_ids"}, err: "invalid"},
		{name: "no such spec", change: func(string) *pb.TeammateSpec { return &pb.TeammateSpec{Id: "nope"} }, err: "not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, path := newStore(t)
			k := mustSkill(t, s, internalSkill("lint"))
			mustTeammate(t, s, &pb.TeammateSpec{Name: "other"})
			orig := mustTeammate(t, s, base(k.GetId()))
			change := tt.change(k.GetId())
			if change.Id == "" {
				change.Id = orig.GetId()
			}
			got, err := s.UpdateTeammate(change, tt.mask)
			if errKind(err) != tt.err {
				t.Fatalf("UpdateTeammate: %v, want %q", err, tt.err)
			}
			if err != nil {
				again, _ := s.TeammateSpec(orig.GetId())
				if !proto.Equal(again, orig) {
					t.Fatalf("a refused update changed the spec: %v", again)
				}
				return
			}
			want := tt.want(k.GetId())
			want.Id, want.CreatedAt = orig.GetId(), orig.GetCreatedAt()
			if !got.GetUpdatedAt().AsTime().After(orig.GetUpdatedAt().AsTime()) {
				t.Fatalf("updated_at %v not after %v", got.GetUpdatedAt().AsTime(), orig.GetUpdatedAt().AsTime())
			}
			want.UpdatedAt = got.GetUpdatedAt()
			checkProtos(t, "updated", []*pb.TeammateSpec{got}, []*pb.TeammateSpec{want})
			reopened, err := openAt(t, path).TeammateSpec(orig.GetId())
			if err != nil || !proto.Equal(reopened, got) {
				t.Fatalf("after reopening: %v (%v), want %v", reopened, err, got)
			}
		})
	}
}

func TestDeleteSkillInUse(t *testing.T) {
	s, _ := newStore(t)
	k := mustSkill(t, s, internalSkill("lint"))
	free := mustSkill(t, s, internalSkill("free"))
	tm := mustTeammate(t, s, &pb.TeammateSpec{Name: "tester", SkillIds: []string{k.GetId()}})
	mustTeammate(t, s, &pb.TeammateSpec{Name: "auditor", SkillIds: []string{k.GetId()}})

	var inUse *InUseError
	if err := s.DeleteSkill(k.GetId()); !errors.As(err, &inUse) || inUse.Skill != "lint" || strings.Join(inUse.Teammates, ",") != "auditor,tester" {
		t.Fatalf("DeleteSkill of a used skill: %v", err)
	}
	if err := s.DeleteSkill(free.GetId()); err != nil {
		t.Fatalf("DeleteSkill of a free skill: %v", err)
	}
	if err := s.DeleteSkill(free.GetId()); !errors.Is(err, ErrSpecNotFound) {
		t.Fatalf("DeleteSkill twice: %v", err)
	}
	if _, err := s.UpdateTeammate(&pb.TeammateSpec{Id: tm.GetId()}, []string{"skill_ids"}); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteSkill(k.GetId()); !errors.As(err, &inUse) || strings.Join(inUse.Teammates, ",") != "auditor" {
		t.Fatalf("DeleteSkill still used by one: %v", err)
	}
}

// TestStoreReopen: what was saved is what a new Store reads, by name, in a
// file only the agent's user may read.
func TestStoreReopen(t *testing.T) {
	s, path := newStore(t)
	skills := []*pb.SkillSpec{
		mustSkill(t, s, &pb.SkillSpec{Name: "web-search", Description: "Search the web", SkillType: pb.SkillType_SKILL_TYPE_OFFICIAL}),
		mustSkill(t, s, &pb.SkillSpec{Name: "pdf-reader", Description: "Read PDFs", SkillType: pb.SkillType_SKILL_TYPE_EXTERNAL,
			PluginName: "document-tools", SkillMdContent: "# PDF Reader", AllowedTools: "Read,Bash", ArgumentHint: "file_path:string"}),
		mustSkill(t, s, internalSkill("custom-linter")),
	}
	tm := []*pb.TeammateSpec{
		mustTeammate(t, s, &pb.TeammateSpec{Name: "tester", Role: "QA", SkillIds: []string{skills[2].GetId()}}),
		mustTeammate(t, s, &pb.TeammateSpec{Name: "researcher", Role: "Research", Instructions: "Document findings.",
			SkillIds: []string{skills[0].GetId(), skills[1].GetId()}, Model: "claude-sonnet-4-5"}),
	}
	gone := mustTeammate(t, s, &pb.TeammateSpec{Name: "gone"})
	if err := s.DeleteTeammate(gone.GetId()); err != nil {
		t.Fatal(err)
	}

	r := openAt(t, path)
	checkProtos(t, "skill specs", r.SkillSpecs(), []*pb.SkillSpec{skills[2], skills[1], skills[0]})
	checkProtos(t, "teammate specs", r.TeammateSpecs(), []*pb.TeammateSpec{tm[1], tm[0]})
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("store file: %v, %v", fi, err)
	}
}

func TestOpenStoreErrors(t *testing.T) {
	tests := []struct {
		name, content, want string
	}{
		{"not JSON", "{", "fix or move the file away"},
		{"newer version", `{"version": 2}`, "unknown version 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), FileName)
			if err := os.WriteFile(path, []byte(tt.content), 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := OpenStore(path, StoreOptions{}); err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), path) {
				t.Fatalf("OpenStore: %v, want an error naming the file and %q", err, tt.want)
			}
		})
	}
}
