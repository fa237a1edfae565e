// The plaintext of a sealed envelope (docs/e2ee-wire.md §3).

export type SealedKind = 'queue' | 'permission';

/** {v:1, id: 128 random bits in hex, at: now in Unix ms, kind, ...fields}; fields cannot override the first four. */
export function sealedPayload(kind: SealedKind, fields: Record<string, unknown>): Record<string, unknown> {
  const id = Array.from(crypto.getRandomValues(new Uint8Array(16)), (b) => b.toString(16).padStart(2, '0')).join('');
  const out: Record<string, unknown> = { v: 1, id, at: Date.now(), kind };
  for (const [k, v] of Object.entries(fields)) if (!(k in out)) out[k] = v;
  return out;
}
