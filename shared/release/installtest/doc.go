// Package installtest checks BetCode's release end to end, the way a user
// meets it: make release's output (built once for linux/amd64) is built a
// second time and compared byte for byte, served from a local HTTP server
// to scripts/install.sh run as a fresh Unix user with an empty home (who
// ends with an enrolled agent running and a device paired through a real
// relay), refused when tampered with, and updated in place by
// `betcode-agent update`. It has only tests.
package installtest
