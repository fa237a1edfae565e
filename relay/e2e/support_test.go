package e2e

import (
	"context"
	"testing"

	"google.golang.org/grpc/metadata"

	"github.com/betcode-dev/betcode/relay/internal/pgtest"
	"github.com/betcode-dev/betcode/shared/claudecli"
)

func pgURL(t *testing.T) string { return pgtest.URL(t) }

func claudePath(t *testing.T) string { return claudecli.Require(t) }

func metadataFollow(ctx context.Context) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "x-betcode-follow", "true")
}
