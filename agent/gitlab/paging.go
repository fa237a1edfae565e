package gitlab

import (
	"context"

	gl "gitlab.com/gitlab-org/api/client-go"
)

// Page sizes: GitLab's default and largest per_page, and the most items
// one list RPC returns.
const (
	defaultLimit = 20
	maxPerPage   = 100
	maxLimit     = 1000
)

// collect returns items offset..offset+limit of a GitLab list, fetching
// as many pages as that spans (per_page up to 100), and the total GitLab
// reports (0 when it does not: GitLab omits X-Total beyond 10,000 items).
func collect[T any](ctx context.Context, limit, offset uint32, fetch func(gl.ListOptions) ([]T, *gl.Response, error)) ([]T, uint32, error) {
	want := int64(limit)
	if want == 0 {
		want = defaultLimit
	}
	want = min(want, maxLimit)
	per := min(want, maxPerPage)
	page := int64(offset)/per + 1
	skip := int64(offset) % per
	var out []T
	var total uint32
	for int64(len(out)) < want {
		if err := ctx.Err(); err != nil {
			return nil, 0, err
		}
		items, resp, err := fetch(gl.ListOptions{Page: page, PerPage: per})
		if err != nil {
			return nil, 0, err
		}
		if resp != nil && resp.TotalItems > 0 {
			total = uint32(min(resp.TotalItems, 1<<32-1))
		}
		if skip > 0 {
			items = items[min(skip, int64(len(items))):]
			skip = 0
		}
		out = append(out, items[:min(int64(len(items)), want-int64(len(out)))]...)
		if resp == nil || resp.NextPage == 0 || len(items) == 0 {
			break
		}
		page = resp.NextPage
	}
	return out, total, nil
}
