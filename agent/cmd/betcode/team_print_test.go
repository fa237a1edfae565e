package main

import (
	"bytes"
	"testing"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

func TestTeamPrinters(t *testing.T) {
	tests := []struct {
		name  string
		print func(*bytes.Buffer) error
		want  string
	}{
		{
			name: "teammates",
			print: func(b *bytes.Buffer) error {
				return printTeammates(b, []*pb.Teammate{
					{AgentId: "sa-1", Name: "tests", Kind: pb.TeammateKind_TEAMMATE_KIND_SUBAGENT, AgentType: "subagent",
						Status: pb.TeammateStatus_TEAMMATE_STATUS_STOPPED, SubagentStatus: stFailed, Error: "API error 400",
						OrchestrationId: "0123456789", StepId: "tests", CostUsd: 0.25},
					{AgentId: "toolu_1", Name: "Explore the repo", Kind: pb.TeammateKind_TEAMMATE_KIND_TASK_TOOL, AgentType: "Explore",
						Status: pb.TeammateStatus_TEAMMATE_STATUS_WORKING, Output: "Looking at\nthe files"},
				})
			},
			want: `AGENT ID  NAME              KIND       TYPE      STATUS            STEP            COST     OUTPUT
sa-1      tests             subagent   subagent  stopped (failed)  01234567/tests  $0.2500  error: API error 400
toolu_1   Explore the repo  task-tool  Explore   working           -               -        Looking at …
`,
		},
		{
			name: "tasks",
			print: func(b *bytes.Buffer) error {
				return printTasks(b, []*pb.TeamTask{
					{Id: "0123456789ab/a", OrchestrationId: "0123456789ab", Subject: "a", Status: pb.TeamTaskStatus_TEAM_TASK_STATUS_COMPLETED,
						StepStatus: stCompleted, AssignedAgentId: "sa-1", Blocks: []string{"0123456789ab/c"}},
					{Id: "0123456789ab/c", OrchestrationId: "0123456789ab", Subject: "c", Status: pb.TeamTaskStatus_TEAM_TASK_STATUS_PENDING,
						StepStatus: stSkipped, BlockedBy: []string{"0123456789ab/a", "0123456789ab/b"}},
					{Id: "1", Subject: "Write the parser", Status: pb.TeamTaskStatus_TEAM_TASK_STATUS_IN_PROGRESS},
				})
			},
			want: `ID          STATUS             OWNER  BLOCKED BY  SUBJECT
01234567/a  completed          sa-1   -           a
01234567/c  pending (skipped)  -      a, b        c
1           in_progress        -      -           Write the parser
`,
		},
		{
			name: "teammate specs",
			print: func(b *bytes.Buffer) error {
				return printTeammateSpecs(b, []*pb.TeammateSpec{
					{Id: "ts-1", Name: "researcher", Role: "Research specialist", SkillIds: []string{"sk-1", "sk-2"}, Instructions: "Read first.\nThen write."},
					{Id: "ts-2", Name: "tester", Model: "claude-haiku"},
				})
			},
			want: `ID    NAME        ROLE                 MODEL         SKILLS      UPDATED  INSTRUCTIONS
ts-1  researcher  Research specialist  -             sk-1, sk-2  -        Read first. …
ts-2  tester      -                    claude-haiku  -           -        -
`,
		},
		{
			name: "skill specs",
			print: func(b *bytes.Buffer) error {
				return printSkillSpecs(b, []*pb.SkillSpec{
					{Id: "sk-1", Name: "db-query", SkillType: pb.SkillType_SKILL_TYPE_INTERNAL, Description: "Query the database", AllowedTools: "Bash,Read"},
					{Id: "sk-2", Name: "pdf", SkillType: pb.SkillType_SKILL_TYPE_EXTERNAL, PluginName: "docs-plugin"},
				})
			},
			want: `ID    NAME      TYPE      PLUGIN       ALLOWED TOOLS  CREATED  DESCRIPTION
sk-1  db-query  internal  -            Bash,Read      -        Query the database
sk-2  pdf       external  docs-plugin  -              -        -
`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := tt.print(&b); err != nil {
				t.Fatal(err)
			}
			if b.String() != tt.want {
				t.Errorf("got\n%s\nwant\n%s", b.String(), tt.want)
			}
		})
	}
}

func TestParseSkillType(t *testing.T) {
	for in, want := range map[string]pb.SkillType{"internal": pb.SkillType_SKILL_TYPE_INTERNAL, "Official": pb.SkillType_SKILL_TYPE_OFFICIAL,
		"skill_type_external": pb.SkillType_SKILL_TYPE_EXTERNAL, "plugin": 0, "unspecified": 0} {
		got, err := parseSkillType(in)
		if got != want || (err != nil) != (want == 0) {
			t.Errorf("parseSkillType(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
}
