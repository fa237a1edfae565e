package deploytest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
)

// kubeconform normally downloads JSON schemas converted from Kubernetes'
// OpenAPI document; this machine (and CI) reach no such host. The schemas
// are therefore generated here from the Go API types of the Kubernetes
// release in go.mod (k8s.io/api) and of the Prometheus Operator, the same
// way: each field its JSON name and type, int-or-string and quantities as
// the types declare them (OpenAPISchemaType, OpenAPIV3OneOfTypes), fields
// without omitempty required, and no field the type lacks (strict).

// schemaKinds are the kinds the chart may render.
var schemaKinds = []struct {
	apiVersion, kind string
	obj              any
}{
	{"apps/v1", "Deployment", appsv1.Deployment{}},
	{"v1", "Service", corev1.Service{}},
	{"v1", "Secret", corev1.Secret{}},
	{"v1", "ServiceAccount", corev1.ServiceAccount{}},
	{"policy/v1", "PodDisruptionBudget", policyv1.PodDisruptionBudget{}},
	{"autoscaling/v2", "HorizontalPodAutoscaler", autoscalingv2.HorizontalPodAutoscaler{}},
	{"monitoring.coreos.com/v1", "ServiceMonitor", monitoringv1.ServiceMonitor{}},
}

// writeSchemas writes a schema per kind into dir, named as kubeconform's
// -schema-location template it returns expects.
func writeSchemas(t *testing.T, dir string) string {
	t.Helper()
	for _, k := range schemaKinds {
		g := &schemaGen{defs: map[string]any{}}
		root := g.schema(reflect.TypeOf(k.obj))
		def := g.defs[strings.TrimPrefix(root["$ref"].(string), "#/definitions/")].(map[string]any)
		props := def["properties"].(map[string]any)
		props["apiVersion"] = map[string]any{"type": "string", "enum": []string{k.apiVersion}}
		props["kind"] = map[string]any{"type": "string", "enum": []string{k.kind}}
		def["required"] = appendUnique(def["required"], "apiVersion", "kind")
		root["definitions"] = g.defs
		b, err := json.MarshalIndent(root, "", " ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, schemaFile(k.apiVersion, k.kind)), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(abs, "{{ .ResourceKind }}-{{ .Group }}-{{ .ResourceAPIVersion }}.json")
}

// schemaFile is the file kubeconform's template above names for a kind:
// Group is the apiVersion's part before the slash ("v1" for the core
// group), ResourceAPIVersion the part after it.
func schemaFile(apiVersion, kind string) string {
	group, version, ok := strings.Cut(apiVersion, "/")
	if !ok {
		version = group
	}
	return strings.ToLower(kind) + "-" + group + "-" + version + ".json"
}

// schemaGen turns Go API types into JSON schemas, one definition per named
// struct type (the types are recursive).
type schemaGen struct{ defs map[string]any }

type openAPIType interface{ OpenAPISchemaType() []string }
type openAPIOneOf interface{ OpenAPIV3OneOfTypes() []string }

var jsonMarshaler = reflect.TypeFor[json.Marshaler]()

func (g *schemaGen) schema(t reflect.Type) map[string]any {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	v := reflect.New(t).Interface()
	if o, ok := v.(openAPIOneOf); ok && len(o.OpenAPIV3OneOfTypes()) > 0 {
		return map[string]any{"type": o.OpenAPIV3OneOfTypes()}
	}
	if o, ok := v.(openAPIType); ok && len(o.OpenAPISchemaType()) > 0 {
		return map[string]any{"type": o.OpenAPISchemaType()[0]}
	}
	if t.Kind() == reflect.Struct && reflect.PointerTo(t).Implements(jsonMarshaler) {
		return map[string]any{} // its own JSON form (RawExtension, JSON): anything
	}
	switch t.Kind() {
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return map[string]any{"type": "integer"}
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}
	case reflect.Interface:
		return map[string]any{}
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return map[string]any{"type": "string"} // base64
		}
		return map[string]any{"type": "array", "items": g.schema(t.Elem())}
	case reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": g.schema(t.Elem())}
	case reflect.Struct:
		name := strings.ReplaceAll(t.PkgPath(), "/", ".") + "." + t.Name()
		ref := map[string]any{"$ref": "#/definitions/" + name}
		if _, ok := g.defs[name]; ok {
			return ref
		}
		def := map[string]any{"type": "object", "additionalProperties": false}
		g.defs[name] = def
		props, required := map[string]any{}, []string{}
		g.fields(t, props, &required)
		def["properties"] = props
		if len(required) > 0 {
			def["required"] = required
		}
		return ref
	}
	panic("deploytest: no schema for " + t.String())
}

// fields adds t's JSON fields, embedded and inline structs' included.
func (g *schemaGen) fields(t reflect.Type, props map[string]any, required *[]string) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" || (!f.IsExported() && !f.Anonymous) {
			continue
		}
		if (f.Anonymous && name == "") || strings.Contains(opts, "inline") {
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			g.fields(ft, props, required)
			continue
		}
		if name == "" {
			name = f.Name
		}
		props[name] = g.schema(f.Type)
		if !strings.Contains(opts, "omitempty") && !strings.Contains(opts, "omitzero") &&
			f.Type.Kind() != reflect.Pointer && name != "status" {
			*required = append(*required, name)
		}
	}
}

func appendUnique(list any, names ...string) []string {
	out, _ := list.([]string)
	for _, n := range names {
		found := false
		for _, o := range out {
			found = found || o == n
		}
		if !found {
			out = append(out, n)
		}
	}
	return out
}

// TestKubeconformRejects: the generated schemas do refuse what the API
// server would, so TestChart's kubeconform pass means something.
func TestKubeconformRejects(t *testing.T) {
	kc := kubeconformBin(t)
	schemas := writeSchemas(t, t.TempDir())
	const pod = `apiVersion: apps/v1
kind: Deployment
metadata: {name: relay}
spec:
  replicas: %s
  selector: {matchLabels: {app: relay}}
  template:
    metadata: {labels: {app: relay}}
    spec:
      containers:
        - %s
`
	tests := []struct {
		name, manifest string
		ok             bool
	}{
		{"valid", fmt.Sprintf(pod, "2", "{name: relay, image: x, ports: [{containerPort: 8443}]}"), true},
		{"unknown container field", fmt.Sprintf(pod, "2", "{name: relay, image: x, readinesProbe: {}}"), false},
		{"replicas as a string", fmt.Sprintf(pod, `"two"`, "{name: relay, image: x}"), false},
		{"container without a name", fmt.Sprintf(pod, "2", "{image: x}"), false},
		{"port as a name where a number goes", fmt.Sprintf(pod, "2", "{name: relay, image: x, ports: [{containerPort: grpc}]}"), false},
		{"wrong apiVersion", "apiVersion: apps/v1\nkind: Service\nmetadata: {name: x}\n", false},
		{"kind without a schema", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n", false},
		{"ServiceMonitor with an unknown field", "apiVersion: monitoring.coreos.com/v1\nkind: ServiceMonitor\nmetadata: {name: x}\nspec: {selector: {}, scrapeEvery: 30s}\n", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "m.yaml")
			if err := os.WriteFile(path, []byte(tt.manifest), 0o600); err != nil {
				t.Fatal(err)
			}
			out, err := run(t, kc, "-strict", "-schema-location", schemas, path)
			if tt.ok && err != nil {
				t.Fatalf("refused a valid manifest: %v", err)
			}
			if !tt.ok && err == nil {
				t.Fatalf("accepted:\n%s\n%s", tt.manifest, out)
			}
		})
	}
}
