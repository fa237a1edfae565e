// Package release builds, signs and verifies BetCode's release artefacts.
//
// A release is a directory (dist/ for make release, a web server's folder
// for users) holding one archive per binary and platform, named
// NAME_VERSION_OS_ARCH.tar.gz (.zip on Windows), a CycloneDX SBOM per
// archive (ARCHIVE.cdx.json), checksums.txt in sha256sum's format over all
// of them, and checksums.txt.sig, an SSH signature of checksums.txt made
// with `ssh-keygen -Y sign -n betcode-release` by the key whose public half
// is AllowedSigners (docs/releasing.md).
//
// Build makes such a directory reproducibly: the same commit gives the same
// bytes (-trimpath, no build id, CGO off, archive entries with fixed times,
// owners and order, gzip without a timestamp). Verify checks checksums.txt's
// signature with ssh-keygen, the well-kept tool, and Fetch downloads and
// verifies an archive the way scripts/install.sh does, for
// `betcode-agent update`.
package release
