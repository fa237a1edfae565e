// Package gitlab serves GitLabService: a read-only view of the GitLab
// project behind a session's working directory (merge requests, pipelines
// and their jobs, job logs, issues), fetched with GitLab's own Go client
// (gitlab.com/gitlab-org/api/client-go) from the configured instance with the
// configured token.
//
// A request names its project directly (GitLabProject.project), or by a
// checkout (working_directory) or a session (session_id) whose git remotes
// are parsed (ParseRemote) and matched against the configured GitLab host.
//
// Failures become gRPC statuses with BetCode error codes (errors.go): a
// refused token PERMISSION_DENIED/GITLAB_AUTH_FAILED, an unknown project or
// item NOT_FOUND/GITLAB_NOT_FOUND, rate limiting RESOURCE_EXHAUSTED/
// RATE_LIMITED with retry_after_ms once the bounded retries that honour
// Retry-After are spent, an unreachable instance UNAVAILABLE/
// GITLAB_UNREACHABLE. The token is sent only to GitLab and never logged.
package gitlab
