package image

import (
	"bytes"
	"crypto/sha256"
	"debug/buildinfo"
	"fmt"
	"strings"
	"time"

	cdx "github.com/CycloneDX/cyclonedx-go"
)

// sbom returns the CycloneDX (1.6, JSON) bill of materials of the Go
// binary at path, from the module list the Go toolchain embeds in it (what
// `cyclonedx-gomod bin` reads): the relay's module, every module linked
// into it with its version and checksum, and the Go toolchain. Its serial
// number derives from the binary's bytes and its timestamp is created, so
// the same binary gives the same document.
func sbom(binary []byte, path, version string, created time.Time) ([]byte, error) {
	info, err := buildinfo.Read(bytes.NewReader(binary))
	if err != nil {
		return nil, fmt.Errorf("image: sbom: build info of %s: %w", path, err)
	}
	sum := sha256.Sum256(binary)
	main := cdx.Component{
		BOMRef: purl(info.Main.Path, version), Type: cdx.ComponentTypeApplication,
		Name: info.Main.Path, Version: version, PackageURL: purl(info.Main.Path, version),
		Hashes: &[]cdx.Hash{{Algorithm: cdx.HashAlgoSHA256, Value: fmt.Sprintf("%x", sum)}},
	}
	var props []cdx.Property
	for _, s := range info.Settings {
		props = append(props, cdx.Property{Name: "cdx:gomod:build:env:" + s.Key, Value: s.Value})
	}
	props = append(props, cdx.Property{Name: "cdx:gomod:binary:name", Value: "betcode-relay"})
	main.Properties = &props
	goVersion := strings.TrimPrefix(info.GoVersion, "go")
	components := []cdx.Component{{
		BOMRef: purl("std", goVersion), Type: cdx.ComponentTypeLibrary, Name: "std", Version: goVersion,
		PackageURL: purl("std", goVersion), Description: "the Go standard library (" + info.GoVersion + ")",
	}}
	deps := []string{purl("std", goVersion)}
	for _, m := range info.Deps {
		if m.Replace != nil {
			m = m.Replace
		}
		c := cdx.Component{
			BOMRef: purl(m.Path, m.Version), Type: cdx.ComponentTypeLibrary, Name: m.Path,
			Version: m.Version, PackageURL: purl(m.Path, m.Version), Scope: cdx.ScopeRequired,
		}
		if m.Sum != "" {
			c.Properties = &[]cdx.Property{{Name: "cdx:gomod:module:checksum", Value: m.Sum}}
		}
		components = append(components, c)
		deps = append(deps, c.BOMRef)
	}
	bom := cdx.NewBOM()
	bom.SerialNumber = "urn:uuid:" + uuidOf(sum[:])
	bom.Metadata = &cdx.Metadata{
		Timestamp: created.UTC().Format(time.RFC3339),
		Component: &main,
		Tools: &cdx.ToolsChoice{Components: &[]cdx.Component{{
			Type: cdx.ComponentTypeApplication, Name: "betcode-relay-image",
			Description: "relay/internal/image: the module list embedded in the binary, with github.com/CycloneDX/cyclonedx-go",
		}}},
	}
	bom.Components = &components
	bom.Dependencies = &[]cdx.Dependency{{Ref: main.BOMRef, Dependencies: &deps}}
	var out bytes.Buffer
	if err := cdx.NewBOMEncoder(&out, cdx.BOMFileFormatJSON).SetPretty(true).EncodeVersion(bom, cdx.SpecVersion1_6); err != nil {
		return nil, fmt.Errorf("image: sbom: encode: %w", err)
	}
	return out.Bytes(), nil
}

// purl is the package URL of Go module path at version.
func purl(path, version string) string {
	if version == "" || version == "(devel)" {
		return "pkg:golang/" + path
	}
	return "pkg:golang/" + path + "@" + version
}

// uuidOf formats the first 16 bytes of b as a version 4 style UUID, so a
// serial number is fixed by the binary it describes.
func uuidOf(b []byte) string {
	var u [16]byte
	copy(u[:], b)
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}
