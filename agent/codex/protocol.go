package codex

import "encoding/json"

// Methods of the app-server protocol this package uses. The schema test
// checks each against the pinned version's ClientRequest, ServerRequest,
// ServerNotification and ClientNotification schemas.
const (
	// Client requests.
	MethodInitialize    = "initialize"
	MethodThreadStart   = "thread/start"
	MethodThreadResume  = "thread/resume"
	MethodTurnStart     = "turn/start"
	MethodTurnInterrupt = "turn/interrupt"
	// Client notification.
	MethodInitialized = "initialized"

	// Server notifications.
	MethodThreadStarted          = "thread/started"
	MethodTurnStarted            = "turn/started"
	MethodTurnCompleted          = "turn/completed"
	MethodItemStarted            = "item/started"
	MethodItemCompleted          = "item/completed"
	MethodAgentMessageDelta      = "item/agentMessage/delta"
	MethodReasoningSummaryDelta  = "item/reasoning/summaryTextDelta"
	MethodReasoningTextDelta     = "item/reasoning/textDelta"
	MethodCommandOutputDelta     = "item/commandExecution/outputDelta"
	MethodTokenUsageUpdated      = "thread/tokenUsage/updated"
	MethodError                  = "error"
	MethodServerRequestResolved  = "serverRequest/resolved"
	MethodCommandApprovalRequest = "item/commandExecution/requestApproval"
	MethodFileChangeApproval     = "item/fileChange/requestApproval"
)

// ClientInfo names the client in initialize; Name becomes the originator
// header Codex sends to the model server.
type ClientInfo struct {
	Name    string `json:"name"`
	Title   string `json:"title,omitempty"`
	Version string `json:"version"`
}

// InitializeCapabilities are the client's opt-ins.
type InitializeCapabilities struct {
	ExperimentalAPI           bool     `json:"experimentalApi,omitempty"`
	OptOutNotificationMethods []string `json:"optOutNotificationMethods,omitempty"`
}

// InitializeParams are the params of initialize.
type InitializeParams struct {
	ClientInfo   ClientInfo              `json:"clientInfo"`
	Capabilities *InitializeCapabilities `json:"capabilities,omitempty"`
}

// InitializeResponse is the result of initialize.
type InitializeResponse struct {
	UserAgent      string `json:"userAgent"`
	CodexHome      string `json:"codexHome"`
	PlatformFamily string `json:"platformFamily"`
	PlatformOs     string `json:"platformOs"`
}

// ThreadStartParams are the params of thread/start. ApprovalPolicy and
// Sandbox are always set by this package (see Config).
type ThreadStartParams struct {
	Cwd                   string `json:"cwd,omitempty"`
	Model                 string `json:"model,omitempty"`
	ApprovalPolicy        string `json:"approvalPolicy"`
	Sandbox               string `json:"sandbox"`
	DeveloperInstructions string `json:"developerInstructions,omitempty"`
	Ephemeral             bool   `json:"ephemeral,omitempty"`
}

// ThreadResumeParams are the params of thread/resume.
type ThreadResumeParams struct {
	ThreadID              string `json:"threadId"`
	Cwd                   string `json:"cwd,omitempty"`
	Model                 string `json:"model,omitempty"`
	ApprovalPolicy        string `json:"approvalPolicy"`
	Sandbox               string `json:"sandbox"`
	DeveloperInstructions string `json:"developerInstructions,omitempty"`
	ExcludeTurns          bool   `json:"excludeTurns,omitempty"`
}

// ThreadResponse is the result of thread/start and thread/resume.
type ThreadResponse struct {
	Thread         Thread          `json:"thread"`
	Model          string          `json:"model"`
	ModelProvider  string          `json:"modelProvider"`
	Cwd            string          `json:"cwd"`
	ApprovalPolicy json.RawMessage `json:"approvalPolicy"`
	Sandbox        json.RawMessage `json:"sandbox"`
}

// Thread is a Codex conversation. Its ID is a UUIDv7 that also names the
// rollout file under CODEX_HOME/sessions.
type Thread struct {
	ID            string  `json:"id"`
	SessionID     string  `json:"sessionId"`
	Cwd           string  `json:"cwd"`
	Model         *string `json:"model"`
	ModelProvider string  `json:"modelProvider"`
	CliVersion    string  `json:"cliVersion"`
	Path          *string `json:"path"`
	Preview       string  `json:"preview"`
	Turns         []Turn  `json:"turns"`
}

// UserInput is one element of turn/start's input: text (Type "text") or
// an image by URL, a data: URL included (Type "image").
type UserInput struct {
	Type string `json:"type"`
	Text string `json:"text,omitempty"`
	URL  string `json:"url,omitempty"`
}

// User input types.
const (
	InputText  = "text"
	InputImage = "image"
)

// MarshalJSON always sends a text input's text, even an empty one: Codex
// requires the field.
func (u UserInput) MarshalJSON() ([]byte, error) {
	type plain UserInput
	if u.Type == InputText {
		return json.Marshal(struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}{u.Type, u.Text})
	}
	return json.Marshal(plain(u))
}

// TurnStartParams are the params of turn/start.
type TurnStartParams struct {
	ThreadID string      `json:"threadId"`
	Input    []UserInput `json:"input"`
}

// TurnStartResponse is the result of turn/start.
type TurnStartResponse struct {
	Turn Turn `json:"turn"`
}

// TurnInterruptParams are the params of turn/interrupt.
type TurnInterruptParams struct {
	ThreadID string `json:"threadId"`
	TurnID   string `json:"turnId"`
}

// Turn statuses.
const (
	TurnStatusCompleted   = "completed"
	TurnStatusInterrupted = "interrupted"
	TurnStatusFailed      = "failed"
	TurnStatusInProgress  = "inProgress"
)

// Turn is one user turn of a thread.
type Turn struct {
	ID         string     `json:"id"`
	Status     string     `json:"status"`
	Error      *TurnError `json:"error"`
	Items      []Item     `json:"items"`
	DurationMs *int64     `json:"durationMs"`
}

// TurnError describes why a turn failed. CodexErrorInfo is a string
// ("internalServerError", "other", ...) or an object such as
// {"responseTooManyFailedAttempts":{"httpStatusCode":429}}.
type TurnError struct {
	Message           string          `json:"message"`
	CodexErrorInfo    json.RawMessage `json:"codexErrorInfo"`
	AdditionalDetails *string         `json:"additionalDetails"`
}

// Item types of the ThreadItem union this package interprets.
const (
	ItemUserMessage      = "userMessage"
	ItemAgentMessage     = "agentMessage"
	ItemReasoning        = "reasoning"
	ItemCommandExecution = "commandExecution"
	ItemFileChange       = "fileChange"
)

// Item statuses of commandExecution and fileChange items.
const (
	ItemStatusInProgress = "inProgress"
	ItemStatusCompleted  = "completed"
	ItemStatusFailed     = "failed"
	ItemStatusDeclined   = "declined"
)

// Item is a ThreadItem, with the fields of the variants BetCode maps; the
// others keep only Type and ID.
type Item struct {
	Type string `json:"type"`
	ID   string `json:"id"`
	// Text of an agentMessage (or plan).
	Text string `json:"text,omitempty"`
	// Summary of a reasoning item, one string per summary part.
	Summary []string `json:"summary,omitempty"`
	// Command, Cwd, AggregatedOutput, ExitCode and DurationMs describe a
	// commandExecution; Command is the shell invocation, e.g.
	// "/bin/bash -lc 'echo hi'".
	Command          string  `json:"command,omitempty"`
	Cwd              string  `json:"cwd,omitempty"`
	AggregatedOutput *string `json:"aggregatedOutput,omitempty"`
	ExitCode         *int    `json:"exitCode,omitempty"`
	DurationMs       *int64  `json:"durationMs,omitempty"`
	// Changes of a fileChange.
	Changes []FileUpdateChange `json:"changes,omitempty"`
	// Status of a commandExecution or fileChange: inProgress, completed,
	// failed or declined.
	Status string `json:"status,omitempty"`
}

// FileUpdateChange is one file of a fileChange item. Kind is
// {"type":"add"|"delete"|"update","move_path":...}.
type FileUpdateChange struct {
	Path string          `json:"path"`
	Kind PatchChangeKind `json:"kind"`
	Diff string          `json:"diff"`
}

// PatchChangeKind says how a file changes.
type PatchChangeKind struct {
	Type     string  `json:"type"`
	MovePath *string `json:"move_path,omitempty"`
}

// ItemNotification is the params of item/started and item/completed.
type ItemNotification struct {
	Item     Item   `json:"item"`
	ThreadID string `json:"threadId"`
	TurnID   string `json:"turnId"`
}

// DeltaNotification is the params of the item delta notifications
// (agentMessage, reasoning summary and text, command output).
type DeltaNotification struct {
	ThreadID string `json:"threadId"`
	TurnID   string `json:"turnId"`
	ItemID   string `json:"itemId"`
	Delta    string `json:"delta"`
}

// TurnNotification is the params of turn/started and turn/completed.
type TurnNotification struct {
	ThreadID string `json:"threadId"`
	Turn     Turn   `json:"turn"`
}

// TokenUsageBreakdown counts tokens. InputTokens includes the cached ones;
// OutputTokens includes the reasoning ones.
type TokenUsageBreakdown struct {
	TotalTokens           int64 `json:"totalTokens"`
	InputTokens           int64 `json:"inputTokens"`
	CachedInputTokens     int64 `json:"cachedInputTokens"`
	CacheWriteInputTokens int64 `json:"cacheWriteInputTokens"`
	OutputTokens          int64 `json:"outputTokens"`
	ReasoningOutputTokens int64 `json:"reasoningOutputTokens"`
}

// ThreadTokenUsage is the usage after one model request: Last for that
// request, Total for the whole thread.
type ThreadTokenUsage struct {
	Total              TokenUsageBreakdown `json:"total"`
	Last               TokenUsageBreakdown `json:"last"`
	ModelContextWindow *int64              `json:"modelContextWindow"`
}

// TokenUsageNotification is the params of thread/tokenUsage/updated.
type TokenUsageNotification struct {
	ThreadID   string           `json:"threadId"`
	TurnID     string           `json:"turnId"`
	TokenUsage ThreadTokenUsage `json:"tokenUsage"`
}

// ErrorNotification is the params of error: a model request failed, and
// Codex retries it when WillRetry is set.
type ErrorNotification struct {
	Error     TurnError `json:"error"`
	WillRetry bool      `json:"willRetry"`
	ThreadID  string    `json:"threadId"`
	TurnID    string    `json:"turnId"`
}

// ServerRequestResolvedNotification is the params of serverRequest/resolved:
// an approval request was answered or withdrawn.
type ServerRequestResolvedNotification struct {
	ThreadID  string          `json:"threadId"`
	RequestID json.RawMessage `json:"requestId"`
}

// CommandExecutionRequestApprovalParams are the params of
// item/commandExecution/requestApproval.
type CommandExecutionRequestApprovalParams struct {
	ThreadID    string  `json:"threadId"`
	TurnID      string  `json:"turnId"`
	ItemID      string  `json:"itemId"`
	StartedAtMs int64   `json:"startedAtMs"`
	Reason      *string `json:"reason"`
	Command     *string `json:"command"`
	Cwd         *string `json:"cwd"`
}

// FileChangeRequestApprovalParams are the params of
// item/fileChange/requestApproval; the paths and diff are in the fileChange
// item announced before it.
type FileChangeRequestApprovalParams struct {
	ThreadID    string  `json:"threadId"`
	TurnID      string  `json:"turnId"`
	ItemID      string  `json:"itemId"`
	StartedAtMs int64   `json:"startedAtMs"`
	Reason      *string `json:"reason"`
	GrantRoot   *string `json:"grantRoot"`
}

// ApprovalResponse is the result sent back for an approval request.
type ApprovalResponse struct {
	Decision Decision `json:"decision"`
}
