package configsvc

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/betcode-dev/betcode/agent/config"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

type applied struct {
	values  map[string]any
	changed []string
}

func newService(t *testing.T, settings map[string]config.Setting) (*Service, *[]applied, string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), config.SettingsFile)
	var calls []applied
	s := New(config.Snapshot{Settings: settings, File: file}, Options{
		Home: t.TempDir(),
		Apply: func(values map[string]any, changed []string) error {
			calls = append(calls, applied{values, changed})
			return nil
		},
		Grants: func(_ context.Context, id string) ([]string, error) {
			if id == "s1" {
				return []string{"Bash(make *)"}, nil
			}
			return nil, nil
		},
	})
	return s, &calls, file
}

func extra(t *testing.T, m map[string]any) *pb.Settings {
	t.Helper()
	st, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatal(err)
	}
	return &pb.Settings{Extra: st}
}

func user(in *pb.Settings, paths ...string) *pb.UpdateSettingsRequest {
	return &pb.UpdateSettingsRequest{Scope: pb.ConfigScope_CONFIG_SCOPE_USER, Settings: in, UpdateMask: &fieldmaskpb.FieldMask{Paths: paths}}
}

func TestUpdateSettingsInvalid(t *testing.T) {
	tests := []struct {
		name string
		req  *pb.UpdateSettingsRequest
		key  string // the ErrorInfo's key
	}{
		{name: "no scope", req: &pb.UpdateSettingsRequest{Settings: &pb.Settings{}, UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"default_model"}}}, key: "scope"},
		{name: "project scope", req: &pb.UpdateSettingsRequest{Scope: pb.ConfigScope_CONFIG_SCOPE_PROJECT}, key: "scope"},
		{name: "no mask", req: user(&pb.Settings{}), key: "update_mask"},
		{name: "unknown field", req: user(&pb.Settings{}, "colour"), key: "colour"},
		{name: "unknown extra key", req: user(extra(t, map[string]any{"colour": "red"}), "extra.colour"), key: "colour"},
		{name: "extra key without value", req: user(extra(t, map[string]any{}), "extra.model"), key: "model"},
		{name: "bad duration", req: user(extra(t, map[string]any{"permission-timeout": "soon"}), "extra.permission-timeout"), key: "permission-timeout"},
		{name: "bad rule", req: user(&pb.Settings{Permissions: &pb.PermissionRules{Deny: []string{"Bash(unclosed"}}}, "permissions.deny"), key: "deny"},
		{name: "bad rule in whole permissions", req: user(&pb.Settings{Permissions: &pb.PermissionRules{Ask: []string{"("}}}, "permissions"), key: "ask"},
		{name: "zero processes", req: user(&pb.Settings{}, "max_concurrent_sessions"), key: "max-processes"},
		{name: "read-only data dir", req: user(extra(t, map[string]any{"data-dir": "/tmp/x"}), "extra.data-dir"), key: "data-dir"},
		{name: "default mode", req: user(&pb.Settings{}, "permissions.default_mode"), key: "permissions.default_mode"},
		{name: "feature flags", req: user(&pb.Settings{}, "feature_flags"), key: "feature_flags"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, calls, file := newService(t, nil)
			_, err := s.UpdateSettings(context.Background(), tc.req)
			st := status.Convert(err)
			if st.Code() != codes.InvalidArgument || !strings.HasPrefix(st.Message(), tc.key+":") {
				t.Fatalf("err = %v, want INVALID_ARGUMENT naming %s", err, tc.key)
			}
			var info *errdetails.ErrorInfo
			for _, d := range st.Details() {
				if ei, ok := d.(*errdetails.ErrorInfo); ok {
					info = ei
				}
			}
			if info == nil || info.Reason != "INVALID_ARGUMENT" || info.Metadata["key"] != tc.key {
				t.Errorf("ErrorInfo = %v, want key %s", info, tc.key)
			}
			if len(*calls) != 0 {
				t.Errorf("applied %v", *calls)
			}
			if _, err := os.Stat(file); !os.IsNotExist(err) {
				t.Errorf("settings file written: %v", err)
			}
		})
	}
}

func TestUpdateSettingsAppliesStoresOrDefers(t *testing.T) {
	s, calls, file := newService(t, map[string]config.Setting{
		"model":         {Value: "", Source: config.SourceDefault},
		"hang-timeout":  {Value: 10 * time.Minute, Source: config.SourceConfigFile},
		"max-processes": {Value: 8, Source: config.SourceEnv},
	})
	in := extra(t, map[string]any{"permission-timeout": "30s", "hang-timeout": "1m", "listen": []any{"127.0.0.1:7000"}})
	in.DefaultModel = "opus"
	in.MaxConcurrentSessions = 2
	in.Permissions = &pb.PermissionRules{Deny: []string{"Bash(rm *)"}}
	got, err := s.UpdateSettings(context.Background(), user(in,
		"default_model", "permissions.deny", "extra.permission-timeout", "extra.hang-timeout", "extra.listen", "max_concurrent_sessions"))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"hang-timeout", "listen"}; !slices.Equal(got.RestartRequired, want) {
		t.Errorf("restart_required = %v, want %v", got.RestartRequired, want)
	}
	if want := []string{"max-processes"}; !slices.Equal(got.Overridden, want) {
		t.Errorf("overridden = %v, want %v", got.Overridden, want)
	}
	if len(*calls) != 1 || !slices.Equal((*calls)[0].changed, []string{"deny", "model", "permission-timeout"}) {
		t.Fatalf("applied %v, want deny, model and permission-timeout at once", *calls)
	}
	if v := (*calls)[0].values; v["permission-timeout"] != 30*time.Second || v["model"] != "opus" || !reflect.DeepEqual(v["deny"], []string{"Bash(rm *)"}) {
		t.Errorf("applied values %v", v)
	}
	if got.DefaultModel != "opus" || !slices.Equal(got.Permissions.Deny, []string{"Bash(rm *)"}) || got.MaxConcurrentSessions != 8 {
		t.Errorf("settings in effect = %v", got)
	}
	if got.Extra.Fields["hang-timeout"].GetStringValue() != "10m0s" || got.Extra.Fields["permission-timeout"].GetStringValue() != "30s" {
		t.Errorf("extra = %v: hang-timeout waits for a restart, permission-timeout is in effect", got.Extra)
	}
	byKey := map[string]*pb.SettingValue{}
	for _, v := range got.Values {
		byKey[v.Key] = v
	}
	for key, want := range map[string]struct {
		src     pb.SettingSource
		pending bool
	}{
		"model":              {pb.SettingSource_SETTING_SOURCE_SETTINGS_FILE, false},
		"hang-timeout":       {pb.SettingSource_SETTING_SOURCE_CONFIG_FILE, true},
		"listen":             {pb.SettingSource_SETTING_SOURCE_DEFAULT, true},
		"max-processes":      {pb.SettingSource_SETTING_SOURCE_ENVIRONMENT, false},
		"permission-timeout": {pb.SettingSource_SETTING_SOURCE_SETTINGS_FILE, false},
	} {
		if v := byKey[key]; v.GetSource() != want.src || v.GetRestartPending() != want.pending {
			t.Errorf("%s = %v, want source %v, restart pending %v", key, v, want.src, want.pending)
		}
	}
	if v := byKey["permission-timeout"]; !v.Hot || v.Env != "BETCODE_PERMISSION_TIMEOUT" {
		t.Errorf("permission-timeout = %v", v)
	}
	stored, err := config.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"model": "opus", "deny": []string{"Bash(rm *)"}, "permission-timeout": 30 * time.Second,
		"hang-timeout": time.Minute, "listen": []string{"127.0.0.1:7000"}, "max-processes": 2,
	}
	if !reflect.DeepEqual(stored, want) {
		t.Errorf("settings file = %v, want %v", stored, want)
	}
	fi, _ := os.Stat(file)
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("settings file mode %v", fi.Mode())
	}

	// GetSettings reports the same, and a second update keeps the first.
	if _, err := s.UpdateSettings(context.Background(), user(extra(t, map[string]any{"auto-compact-tokens": 1000.0}), "extra.auto-compact-tokens")); err != nil {
		t.Fatal(err)
	}
	stored, _ = config.ReadFile(file)
	if stored["model"] != "opus" || stored["auto-compact-tokens"] != uint64(1000) {
		t.Errorf("settings file after a second update = %v", stored)
	}
	g, err := s.GetSettings(context.Background(), &pb.GetSettingsRequest{})
	if err != nil || g.AutoCompactThreshold != 1000 || g.DefaultModel != "opus" {
		t.Errorf("GetSettings = %v, %v", g, err)
	}
}

func TestSettingSourcesMatchProto(t *testing.T) {
	for src, want := range map[config.Source]pb.SettingSource{
		config.SourceUnknown: pb.SettingSource_SETTING_SOURCE_UNSPECIFIED, config.SourceDefault: pb.SettingSource_SETTING_SOURCE_DEFAULT,
		config.SourceConfigFile: pb.SettingSource_SETTING_SOURCE_CONFIG_FILE, config.SourceSettingsFile: pb.SettingSource_SETTING_SOURCE_SETTINGS_FILE,
		config.SourceEnv: pb.SettingSource_SETTING_SOURCE_ENVIRONMENT, config.SourceFlag: pb.SettingSource_SETTING_SOURCE_FLAG,
	} {
		if pb.SettingSource(src) != want {
			t.Errorf("config source %d is %v in the API, want %v", src, pb.SettingSource(src), want)
		}
	}
}
