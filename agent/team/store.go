package team

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/betcode-dev/betcode/agent/internal/atomicfile"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// FileName is the Store's file in the agent's data directory.
const FileName = "team-specs.json"

// Limits of a spec's fields.
const (
	// MaxSkillContent is the most bytes of a skill's SKILL.md content.
	MaxSkillContent = 64 << 10
	// MaxInstructions is the most bytes of a teammate spec's instructions.
	MaxInstructions = 64 << 10
	// MaxName is the most characters of a spec's name.
	MaxName = 100
	// maxField bounds the other text fields (role, description, ...).
	maxField = 4 << 10
)

// StoreOptions configure a Store. Zero values take the defaults.
type StoreOptions struct {
	// Now is the clock of created_at and updated_at [time.Now].
	Now func() time.Time
	// NewID makes spec ids [uuid.NewString].
	NewID func() string
}

// Store keeps the teammate and skill specs in one JSON file, rewritten
// whole (atomically) on every change: specs are few and small, and one file
// keeps "a teammate spec names only existing skills" true across a crash.
// It is safe for concurrent use.
type Store struct {
	path string
	opt  StoreOptions

	mu        sync.Mutex
	teammates []*pb.TeammateSpec
	skills    []*pb.SkillSpec
}

// fileV1 is the file's format: plain structs rather than the proto
// messages, so that the file stays readable and does not change with the
// API; field names are the proto's.
type fileV1 struct {
	Version   int            `json:"version"`
	Teammates []teammateJSON `json:"teammate_specs"`
	Skills    []skillJSON    `json:"skill_specs"`
}

type teammateJSON struct {
	ID           string    `json:"id"`
	Name         string    `json:"name"`
	Role         string    `json:"role,omitempty"`
	Instructions string    `json:"instructions,omitempty"`
	SkillIDs     []string  `json:"skill_ids,omitempty"`
	Model        string    `json:"model,omitempty"`
	CreatedAt    time.Time `json:"created_at"`
	UpdatedAt    time.Time `json:"updated_at"`
}

type skillJSON struct {
	ID             string    `json:"id"`
	Name           string    `json:"name"`
	Description    string    `json:"description,omitempty"`
	SkillType      string    `json:"skill_type"`
	SkillMDContent string    `json:"skill_md_content,omitempty"`
	PluginName     string    `json:"plugin_name,omitempty"`
	AllowedTools   string    `json:"allowed_tools,omitempty"`
	ArgumentHint   string    `json:"argument_hint,omitempty"`
	CreatedAt      time.Time `json:"created_at"`
}

// OpenStore reads the store at path (a missing file is an empty store).
func OpenStore(path string, opt StoreOptions) (*Store, error) {
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if opt.NewID == nil {
		opt.NewID = uuid.NewString
	}
	s := &Store{path: path, opt: opt}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read team specs: %w", err)
	}
	var f fileV1
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("read team specs %s: %w (fix or move the file away)", path, err)
	}
	if f.Version != 1 {
		return nil, fmt.Errorf("read team specs %s: unknown version %d (written by a newer agent?)", path, f.Version)
	}
	for _, t := range f.Teammates {
		s.teammates = append(s.teammates, &pb.TeammateSpec{
			Id: t.ID, Name: t.Name, Role: t.Role, Instructions: t.Instructions, SkillIds: t.SkillIDs, Model: t.Model,
			CreatedAt: timestamppb.New(t.CreatedAt), UpdatedAt: timestamppb.New(t.UpdatedAt),
		})
	}
	for _, k := range f.Skills {
		s.skills = append(s.skills, &pb.SkillSpec{
			Id: k.ID, Name: k.Name, Description: k.Description, SkillType: skillTypes[k.SkillType],
			SkillMdContent: k.SkillMDContent, PluginName: k.PluginName, AllowedTools: k.AllowedTools,
			ArgumentHint: k.ArgumentHint, CreatedAt: timestamppb.New(k.CreatedAt),
		})
	}
	return s, nil
}

// skillTypes maps the file's (ccgrid's) skill type names.
var skillTypes = map[string]pb.SkillType{
	"official": pb.SkillType_SKILL_TYPE_OFFICIAL,
	"external": pb.SkillType_SKILL_TYPE_EXTERNAL,
	"internal": pb.SkillType_SKILL_TYPE_INTERNAL,
}

func skillTypeName(t pb.SkillType) string {
	for name, v := range skillTypes {
		if v == t {
			return name
		}
	}
	return ""
}

// saveLocked writes the whole store; s.mu is held.
func (s *Store) saveLocked() error {
	f := fileV1{Version: 1, Teammates: []teammateJSON{}, Skills: []skillJSON{}}
	for _, t := range s.teammates {
		f.Teammates = append(f.Teammates, teammateJSON{
			ID: t.GetId(), Name: t.GetName(), Role: t.GetRole(), Instructions: t.GetInstructions(), SkillIDs: t.GetSkillIds(),
			Model: t.GetModel(), CreatedAt: t.GetCreatedAt().AsTime(), UpdatedAt: t.GetUpdatedAt().AsTime(),
		})
	}
	for _, k := range s.skills {
		f.Skills = append(f.Skills, skillJSON{
			ID: k.GetId(), Name: k.GetName(), Description: k.GetDescription(), SkillType: skillTypeName(k.GetSkillType()),
			SkillMDContent: k.GetSkillMdContent(), PluginName: k.GetPluginName(), AllowedTools: k.GetAllowedTools(),
			ArgumentHint: k.GetArgumentHint(), CreatedAt: k.GetCreatedAt().AsTime(),
		})
	}
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return fmt.Errorf("encode team specs: %w", err)
	}
	if err := atomicfile.Write(s.path, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("save team specs: %w", err)
	}
	return nil
}

// byName sorts specs by name, then id.
func byName[T interface {
	GetName() string
	GetId() string
}](specs []T) {
	slices.SortFunc(specs, func(a, b T) int {
		return cmp.Or(cmp.Compare(a.GetName(), b.GetName()), cmp.Compare(a.GetId(), b.GetId()))
	})
}

// TeammateSpecs returns copies of the teammate specs, by name.
func (s *Store) TeammateSpecs() []*pb.TeammateSpec {
	s.mu.Lock()
	out := make([]*pb.TeammateSpec, 0, len(s.teammates))
	for _, t := range s.teammates {
		out = append(out, proto.CloneOf(t))
	}
	s.mu.Unlock()
	byName(out)
	return out
}

// SkillSpecs returns copies of the skill specs, by name.
func (s *Store) SkillSpecs() []*pb.SkillSpec {
	s.mu.Lock()
	out := make([]*pb.SkillSpec, 0, len(s.skills))
	for _, k := range s.skills {
		out = append(out, proto.CloneOf(k))
	}
	s.mu.Unlock()
	byName(out)
	return out
}

// TeammateSpec returns a copy of teammate spec id, or ErrSpecNotFound.
func (s *Store) TeammateSpec(id string) (*pb.TeammateSpec, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := s.teammateIndex(id)
	if i < 0 {
		return nil, fmt.Errorf("teammate spec %q: %w", id, ErrSpecNotFound)
	}
	return proto.CloneOf(s.teammates[i]), nil
}

func (s *Store) teammateIndex(id string) int {
	return slices.IndexFunc(s.teammates, func(t *pb.TeammateSpec) bool { return t.GetId() == id })
}

func (s *Store) skillIndex(id string) int {
	return slices.IndexFunc(s.skills, func(k *pb.SkillSpec) bool { return k.GetId() == id })
}

// CreateTeammate validates and saves a new teammate spec (its id and times
// are set here) and returns it as saved.
func (s *Store) CreateTeammate(spec *pb.TeammateSpec) (*pb.TeammateSpec, error) {
	t := &pb.TeammateSpec{
		Name: strings.TrimSpace(spec.GetName()), Role: spec.GetRole(), Instructions: spec.GetInstructions(),
		SkillIds: spec.GetSkillIds(), Model: strings.TrimSpace(spec.GetModel()),
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.checkTeammateLocked(t, ""); err != nil {
		return nil, err
	}
	now := timestamppb.New(s.opt.Now())
	t.Id, t.CreatedAt, t.UpdatedAt = s.opt.NewID(), now, now
	s.teammates = append(s.teammates, t)
	if err := s.saveLocked(); err != nil {
		s.teammates = s.teammates[:len(s.teammates)-1]
		return nil, err
	}
	return proto.CloneOf(t), nil
}

// TeammateFields are the update_mask paths of UpdateTeammate.
var TeammateFields = []string{"name", "role", "instructions", "skill_ids", "model"}

// UpdateTeammate changes the fields of teammate spec spec.id that mask
// names (every one of TeammateFields when empty) and returns it as saved.
func (s *Store) UpdateTeammate(spec *pb.TeammateSpec, mask []string) (*pb.TeammateSpec, error) {
	if len(mask) == 0 {
		mask = TeammateFields
	}
	for _, f := range mask {
		if !slices.Contains(TeammateFields, f) {
			return nil, invalidf("update_mask: unknown field %q (one of %s)", f, strings.Join(TeammateFields, ", "))
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	i := s.teammateIndex(spec.GetId())
	if i < 0 {
		return nil, fmt.Errorf("teammate spec %q: %w", spec.GetId(), ErrSpecNotFound)
	}
	t := proto.CloneOf(s.teammates[i])
	for _, f := range mask {
		switch f {
		case "name":
			t.Name = strings.TrimSpace(spec.GetName())
		case "role":
			t.Role = spec.GetRole()
		case "instructions":
			t.Instructions = spec.GetInstructions()
		case "skill_ids":
			t.SkillIds = spec.GetSkillIds()
		case "model":
			t.Model = strings.TrimSpace(spec.GetModel())
		}
	}
	if err := s.checkTeammateLocked(t, t.GetId()); err != nil {
		return nil, err
	}
	t.UpdatedAt = timestamppb.New(s.opt.Now())
	old := s.teammates[i]
	s.teammates[i] = t
	if err := s.saveLocked(); err != nil {
		s.teammates[i] = old
		return nil, err
	}
	return proto.CloneOf(t), nil
}

// DeleteTeammate removes teammate spec id.
func (s *Store) DeleteTeammate(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := s.teammateIndex(id)
	if i < 0 {
		return fmt.Errorf("teammate spec %q: %w", id, ErrSpecNotFound)
	}
	old := slices.Clone(s.teammates)
	s.teammates = slices.Delete(s.teammates, i, i+1)
	if err := s.saveLocked(); err != nil {
		s.teammates = old
		return err
	}
	return nil
}

// CreateSkill validates and saves a new skill spec (its id and creation
// time are set here) and returns it as saved.
func (s *Store) CreateSkill(spec *pb.SkillSpec) (*pb.SkillSpec, error) {
	k := proto.CloneOf(spec)
	k.Id, k.CreatedAt = "", nil
	k.Name = strings.TrimSpace(k.GetName())
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.checkSkillLocked(k); err != nil {
		return nil, err
	}
	k.Id, k.CreatedAt = s.opt.NewID(), timestamppb.New(s.opt.Now())
	s.skills = append(s.skills, k)
	if err := s.saveLocked(); err != nil {
		s.skills = s.skills[:len(s.skills)-1]
		return nil, err
	}
	return proto.CloneOf(k), nil
}

// DeleteSkill removes skill spec id, unless a teammate spec names it
// (*InUseError).
func (s *Store) DeleteSkill(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := s.skillIndex(id)
	if i < 0 {
		return fmt.Errorf("skill spec %q: %w", id, ErrSpecNotFound)
	}
	var users []string
	for _, t := range s.teammates {
		if slices.Contains(t.GetSkillIds(), id) {
			users = append(users, t.GetName())
		}
	}
	if len(users) > 0 {
		slices.Sort(users)
		return &InUseError{Skill: s.skills[i].GetName(), Teammates: users}
	}
	old := slices.Clone(s.skills)
	s.skills = slices.Delete(s.skills, i, i+1)
	if err := s.saveLocked(); err != nil {
		s.skills = old
		return err
	}
	return nil
}

// checkTeammateLocked validates t (whose id is self, "" for a new one) and
// drops repeated skill ids; s.mu is held.
func (s *Store) checkTeammateLocked(t *pb.TeammateSpec, self string) error {
	if err := checkName(t.GetName()); err != nil {
		return err
	}
	if slices.ContainsFunc(s.teammates, func(o *pb.TeammateSpec) bool { return o.GetId() != self && o.GetName() == t.GetName() }) {
		return fmt.Errorf("teammate spec %q: %w", t.GetName(), ErrSpecExists)
	}
	switch {
	case len(t.GetRole()) > maxField:
		return invalidf("role is longer than %d bytes", maxField)
	case len(t.GetInstructions()) > MaxInstructions:
		return invalidf("instructions are longer than %d bytes", MaxInstructions)
	case len(t.GetModel()) > maxField:
		return invalidf("model is longer than %d bytes", maxField)
	}
	var ids []string
	for _, id := range t.GetSkillIds() {
		if slices.Contains(ids, id) {
			continue
		}
		if s.skillIndex(id) < 0 {
			return invalidf("skill_ids: no skill spec %q (create it with CreateSkillSpec first)", id)
		}
		ids = append(ids, id)
	}
	t.SkillIds = ids
	return nil
}

// checkSkillLocked validates a new skill spec; s.mu is held.
func (s *Store) checkSkillLocked(k *pb.SkillSpec) error {
	if err := checkName(k.GetName()); err != nil {
		return err
	}
	if slices.ContainsFunc(s.skills, func(o *pb.SkillSpec) bool { return o.GetName() == k.GetName() }) {
		return fmt.Errorf("skill spec %q: %w", k.GetName(), ErrSpecExists)
	}
	switch {
	case skillTypeName(k.GetSkillType()) == "":
		return invalidf("skill_type is required: SKILL_TYPE_OFFICIAL, SKILL_TYPE_EXTERNAL or SKILL_TYPE_INTERNAL")
	case k.GetSkillType() == pb.SkillType_SKILL_TYPE_INTERNAL && strings.TrimSpace(k.GetSkillMdContent()) == "":
		return invalidf("skill_md_content is required for an internal skill")
	case len(k.GetSkillMdContent()) > MaxSkillContent:
		return invalidf("skill_md_content is %d bytes, more than %d (64 KiB)", len(k.GetSkillMdContent()), MaxSkillContent)
	case len(k.GetDescription()) > maxField, len(k.GetPluginName()) > maxField, len(k.GetAllowedTools()) > maxField, len(k.GetArgumentHint()) > maxField:
		return invalidf("description, plugin_name, allowed_tools and argument_hint are limited to %d bytes each", maxField)
	}
	return nil
}

func checkName(name string) error {
	switch {
	case name == "":
		return invalidf("name is required")
	case utf8.RuneCountInString(name) > MaxName:
		return invalidf("name is longer than %d characters", MaxName)
	case strings.ContainsFunc(name, func(r rune) bool { return r < ' ' || r == 0x7f }):
		return invalidf("name contains control characters")
	}
	return nil
}
