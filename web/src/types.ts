// Types of docs/web-api.md (the contract between this app and shared/webapi).

export interface Info { role: 'agent' | 'relay'; version: string; push: boolean; vapidPublicKey?: string; oidc?: boolean }
export interface Me { userId: string; displayName: string }
export interface Machine { id: string; name: string; online: boolean; current: boolean; lastSeen?: string; owner?: string }

export type SessionStatus = 'starting' | 'running' | 'waiting' | 'completed' | 'error';
export type AgentStatus = 'thinking' | 'executing_tool' | 'waiting_for_user' | 'idle' | 'compacting' | 'error';

export interface Session {
  id: string; name: string; cwd: string; model: string;
  status: SessionStatus; agentStatus: AgentStatus;
  costUsd: number; inputTokens: number; outputTokens: number;
  messageCount: number; lastMessage: string; lastStopReason?: string;
  pendingPrompts: number; pending?: StreamEvent[];
  createdAt: string; updatedAt: string; createdBy?: string;
  /** claude-code (also for sessions from before providers), codex, ...; absent from older servers. */
  provider?: string;
}

export interface FileAttachment { name: string; mimeType: string; base64Data: string }
export interface PermissionRule { id: string; toolName: string; pathPattern?: string; behavior: 'allow' | 'deny'; rule: string; source: string; createdAt?: string }
export interface Usage { inputTokens: number; outputTokens: number; costUsd: number }
export interface UsageReport { total: Usage; sessions: (Usage & { id: string; name: string })[] }
export interface FileChange { path: string; status: string; oldPath?: string; additions: number; deletions: number; binary: boolean; staged: boolean }
export interface Changes { isGitRepo: boolean; branch: string; root: string; files: FileChange[]; truncated: boolean }
export interface FileDiff { path: string; diff: string; binary: boolean; truncated: boolean }
export interface PushSub { id: string; endpointHost: string; name: string; createdAt: string; lastStatus?: 'sent' | 'failed' | 'expired'; lastAt?: string; lastError?: string }
export interface PushState { enabled: boolean; vapidPublicKey: string; subscriptions: PushSub[] }
export interface DirEntry { name: string; path: string; isGitRepo: boolean }
export interface Dirs { path: string; parent: string; directories: string[]; entries?: DirEntry[]; truncated: boolean }
export interface DirValidation { valid: boolean; error?: string; path: string; isGitRepo: boolean }
export interface LocalSession {
  id?: string; sessionId?: string; workingDirectory?: string; cwd?: string; updatedAt?: string;
  messageCount?: number; firstPrompt?: string; lastMessagePreview?: string; adopted?: boolean;
}

export interface Task { id: string; subject: string; description?: string; activeForm?: string; status: 'pending' | 'in_progress' | 'completed' }
export interface QuestionOption { value: string; label: string; description?: string }

/** A server → client WebSocket message (or a REST event); fields depend on `type`. */
export interface StreamEvent {
  type: string; sessionId?: string; seq?: number; ts?: string; id?: string;
  [k: string]: unknown;
}

// Teams (docs/web-api.md, "Teams"): ccgrid's Teammate, TeamTask, TeammateSpec and SkillSpec.
export type TeammateStatus = 'starting' | 'working' | 'idle' | 'stopped';
export interface Teammate {
  agentId: string; sessionId: string; name: string; agentType: string; status: TeammateStatus; output: string;
  kind: 'subagent' | 'task_tool'; teammateSessionId?: string; subagentStatus?: string; error?: string;
  orchestrationId?: string; stepId?: string; prompt?: string; createdAt?: string; finishedAt?: string; costUsd?: number;
}
export interface TeamTask {
  id: string; subject: string; description?: string; status: Task['status']; assignedAgentId?: string;
  blocks: string[]; blockedBy: string[]; stepStatus?: string; orchestrationId?: string;
}
export interface TeammateSpec { id: string; name: string; role: string; instructions?: string; skillIds: string[]; model?: string; createdAt: string; updatedAt?: string }
export type SkillType = 'official' | 'external' | 'internal';
export interface SkillSpec {
  id: string; name: string; description: string; skillType: SkillType; createdAt: string;
  pluginName?: string; skillMdContent?: string; allowedTools?: string; argumentHint?: string;
}
