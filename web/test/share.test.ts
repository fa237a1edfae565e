// Sharing a session (docs/security.md, "Sharing a session"): a share code's ticket is "share:USER",
// not a credential, so the browser pairs with its own relay login, and refuses to pair without one.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import v from './testdata/e2ee-vectors.json';
import { formatPairingCode, parsePairingCode, shareCodeUser } from '../src/e2ee/code';
import { pair } from '../src/e2ee/channel';
import { ChannelError } from '../src/e2ee/types';

/** The WebSocket the pairing opens: what it was sent. */
class FakeWS {
  static last: FakeWS;
  binaryType = 'blob';
  sent: (string | Uint8Array)[] = [];
  onopen: (() => void) | null = null;
  onmessage: ((ev: { data: unknown }) => void) | null = null;
  onclose: ((ev: { code: number; reason: string }) => void) | null = null;
  constructor(readonly url: string) {
    FakeWS.last = this;
  }
  send(d: string | Uint8Array) {
    this.sent.push(d);
  }
  close() {}
}

const WS = FakeWS as unknown as new (url: string) => WebSocket;
const tick = () => new Promise((r) => setTimeout(r, 0));
const unhex = (s: string) => Uint8Array.from(s.match(/../g) ?? [], (x) => parseInt(x, 16));
const device = { private: unhex(v.device.private), publicKey: unhex(v.device.public) };

test('share: a share code pairs with the login of the user it is for, never without one', async () => {
  const share = parsePairingCode(formatPairingCode({ ...parsePairingCode(v.pair.code), ticket: 'share:bob' }));
  assert.equal(shareCodeUser(share), 'bob');
  assert.equal(shareCodeUser(parsePairingCode(v.pair.code)), undefined);

  await assert.rejects(
    pair({ code: share, deviceKey: device, name: 'x', wsUrl: 'ws://relay/api/pair' }, WS),
    (e: unknown) => e instanceof ChannelError && e.code === 'INVALID' && /log in to the relay as bob/.test(e.message),
  );

  const p = pair({ code: share, deviceKey: device, name: 'x', wsUrl: 'ws://relay/api/pair', loginToken: 'bct_bob' }, WS);
  FakeWS.last.onopen!();
  await tick();
  assert.deepEqual(JSON.parse(FakeWS.last.sent[0] as string), { type: 'hello', token: 'bct_bob', machine: share.machineId });
  FakeWS.last.onclose!({ code: 4404, reason: 'NOT_FOUND: no machine' });
  await assert.rejects(p, (e: unknown) => e instanceof ChannelError);

  // An ordinary code still pairs with its ticket, whatever the login.
  const q = pair({ code: v.pair.code, deviceKey: device, name: 'x', wsUrl: 'ws://relay/api/pair', loginToken: 'bct_bob' }, WS);
  FakeWS.last.onopen!();
  await tick();
  assert.equal(JSON.parse(FakeWS.last.sent[0] as string).token, v.pair.ticket);
  FakeWS.last.onclose!({ code: 4403, reason: 'PERMISSION_DENIED: spent' });
  await assert.rejects(q, (e: unknown) => e instanceof ChannelError);
});
