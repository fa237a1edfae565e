// Session providers as the web API names them (POST /api/sessions `provider`, Session.provider).

/** The default: the provider of every session that names none. */
export const DEFAULT_PROVIDER = 'claude-code';

/** The providers the new-session form offers, [value, label]; the first is the default. */
export const PROVIDERS: [string, string][] = [
  [DEFAULT_PROVIDER, 'Claude Code'],
  ['codex', 'Codex'],
  ['openai-api', 'OpenAI API'],
  ['acp', 'ACP agent'],
];

/** The provider whose sessions name an agent (providerConfig.agent: one of the machine's --acp-agent names). */
export const ACP_PROVIDER = 'acp';

const LABELS: Record<string, string> = { openclaw: 'OpenClaw', ...Object.fromEntries(PROVIDERS) };

/** The label of a provider (its name when unknown). */
export function providerLabel(p?: string): string {
  return LABELS[p || DEFAULT_PROVIDER] ?? p!;
}

/** The badge the session list shows for a provider: none for Claude Code (or none named). */
export function providerBadge(p?: string): string | null {
  return !p || p === DEFAULT_PROVIDER || p === 'claude' ? null : providerLabel(p);
}
