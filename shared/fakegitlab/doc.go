// Package fakegitlab is a scriptable fake of the GitLab REST API (v4) for
// tests: the read-only endpoints BetCode's GitLabService calls, answering
// with the JSON shapes of GitLab's API documentation.
//
// Served, under /api/v4 (":id" is a numeric project ID or the URL-encoded
// full path, e.g. group%2Frepo):
//
//	GET /projects/:id/merge_requests            state, author_username, order_by, sort
//	GET /projects/:id/merge_requests/:iid
//	GET /projects/:id/pipelines                 ref, status, order_by, sort
//	GET /projects/:id/pipelines/:pipeline_id/jobs
//	GET /projects/:id/jobs/:job_id
//	GET /projects/:id/jobs/:job_id/trace        the log, text/plain
//	GET /projects/:id/issues                    state, labels, assignee_username, order_by, sort
//
// Lists are paged as GitLab pages them (docs.gitlab.com/api/rest/#pagination):
// page and per_page (default 20, at most 100) in the query; X-Page,
// X-Per-Page, X-Total, X-Total-Pages, X-Next-Page, X-Prev-Page and a Link
// header (rel="next", "prev", "first", "last") in the answer.
//
// Errors have GitLab's shapes: a request without the configured token (in
// PRIVATE-TOKEN or "Authorization: Bearer") gets 401 {"message":"401
// Unauthorized"}; an unknown project, merge request, pipeline or job gets 404
// {"message":"404 ... Not Found"}. [Server.FailNext] scripts the next answers,
// e.g. 429 "Retry later" with a Retry-After header, as GitLab's rate limiter
// sends it.
package fakegitlab
