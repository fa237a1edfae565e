package deploytest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// passthrough are values handed to Kubernetes as they are: the key is
// documented, its contents are Kubernetes' own fields.
var passthrough = map[string]bool{"resources": true, "podSecurityContext": true, "securityContext": true}

// TestValuesDocumented: every key of values.yaml has a comment above it
// ("# -- what it does"), except sections, whose keys have theirs.
func TestValuesDocumented(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(chart, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	n := 0
	var walk func(prefix string, m *yaml.Node)
	walk = func(prefix string, m *yaml.Node) {
		for i := 0; i+1 < len(m.Content); i += 2 {
			k, v := m.Content[i], m.Content[i+1]
			path := prefix + k.Value
			section := v.Kind == yaml.MappingNode && len(v.Content) > 0 && !passthrough[k.Value]
			if section {
				walk(path+".", v)
				continue
			}
			n++
			if !strings.HasPrefix(strings.TrimSpace(lastParagraph(k.HeadComment)), "# --") {
				t.Errorf("values.yaml: %s (line %d) has no \"# -- ...\" comment above it", path, k.Line)
			}
		}
	}
	walk("", doc.Content[0])
	if n < 40 {
		t.Fatalf("only %d keys found in values.yaml", n)
	}
}

// lastParagraph is the part of a head comment after its last blank line:
// the comment of the key itself, not a section's introduction above it.
func lastParagraph(c string) string {
	parts := strings.Split(c, "\n\n")
	return parts[len(parts)-1]
}
