package codex

// PinnedVersion is the @openai/codex release BetCode drives and its tests
// run against. scripts/install-codex.sh reads it with sed: keep it on one
// line as `PinnedVersion = "x.y.z"`. Moving it regenerates the protocol
// schema in testdata/schema (go test -run TestSchemaUpToDate -update) and
// must keep every test of this package green.
const PinnedVersion = "0.169.0"
