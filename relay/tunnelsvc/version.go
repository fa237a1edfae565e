package tunnelsvc

import (
	"context"
	"fmt"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	"github.com/betcode-dev/betcode/relay/internal/grpcerr"
	"github.com/betcode-dev/betcode/shared/buildinfo"
)

// CodeAgentTooOld is the BetCode error code (ErrorInfo reason) of a
// Register refused because the agent is older than the relay's minimum;
// its metadata names agent_version, min_agent_version and
// install_version. docs/upgrading.md says what "too old" means.
const CodeAgentTooOld = "AGENT_TOO_OLD"

// InstallCommand is how the refusal tells a user to install an agent.
const InstallCommand = "go install github.com/betcode-dev/betcode/agent/cmd/betcode-agent@"

// ReleasesURL is where the release binaries are.
const ReleasesURL = "https://github.com/betcode-dev/betcode/releases"

// DefaultMinAgentVersion is the oldest agent a relay serves unless told
// otherwise: the minor release before this one (buildinfo.PreviousVersion
// without its patch), as the compatibility policy promises.
func DefaultMinAgentVersion() string {
	v, ok := buildinfo.Parse(buildinfo.PreviousVersion)
	if !ok {
		return ""
	}
	v[2] = 0
	return v.String()
}

// minAgent returns the minimum agent version in force, and false when
// every agent is served.
func (s *Service) minAgent() (buildinfo.Semver, bool) {
	m := s.MinAgentVersion
	if m == "" {
		m = DefaultMinAgentVersion()
	}
	if m == "none" {
		return buildinfo.Semver{}, false
	}
	return buildinfo.Parse(m)
}

// agentTooOld refuses an agent whose version is below the minimum with
// FAILED_PRECONDITION, CodeAgentTooOld and a message saying what to
// install. A version that names no release ("dev", a commit) is served.
func (s *Service) agentTooOld(ctx context.Context, agentVersion string) error {
	min, ok := s.minAgent()
	if !ok {
		return nil
	}
	v, ok := buildinfo.Parse(agentVersion)
	if !ok || !v.Less(min) {
		return nil
	}
	install := min.String()
	if rv, ok := buildinfo.Parse(s.Version); ok && !buildinfo.IsDev(s.Version) && min.Less(rv) {
		install = strings.TrimSpace(s.Version)
		if !strings.HasPrefix(install, "v") {
			install = "v" + install
		}
	}
	relay := "this relay"
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		if a := md.Get(":authority"); len(a) > 0 && a[0] != "" {
			relay = "relay " + a[0]
		}
	}
	msg := fmt.Sprintf("%s requires betcode-agent >= %s (this is %s): install it with `%s%s` or from %s, then restart betcode-agent",
		relay, min, agentVersion, InstallCommand, install, ReleasesURL)
	return grpcerr.Status(codes.FailedPrecondition, CodeAgentTooOld, msg, map[string]string{
		"agent_version": agentVersion, "min_agent_version": min.String(), "install_version": install,
	}).Err()
}
