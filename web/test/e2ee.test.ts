// Unit tests of web/src/e2ee against Go's shared/e2ee: testdata/e2ee-vectors.json is written by
// `go test ./shared/e2ee -run TestVectors -update` from fixed keys and fixed ephemeral keys; every
// message the device sends here must be Go's byte for byte, and every message Go's machine sent
// must open. The live interop (Go and this code as peers) is shared/e2ee/webpeer_test.go.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import v from './testdata/e2ee-vectors.json';
import { base64, fingerprint, fingerprintId, formatPairingCode, parsePairingCode, PairingCodeError, splitHostPort, unbase64 } from '../src/e2ee/code';
import { closeError, dial, encodeFrame, FrameReader, Inbox, openChannel, pair, pairingPSK, pairOver, parseAnswer, type Carrier } from '../src/e2ee/channel';
import { BytesKey, HandshakeState, IK, WebCryptoKey, X, XXpsk3, concat } from '../src/e2ee/noise';
import { seal } from '../src/e2ee/seal';
import { sealedPayload } from '../src/e2ee/payload';
import { ChannelError, type WebChannel } from '../src/e2ee/types';
import { getCurrentMachine, getPairing, listPairings, loadOrCreateDeviceKey, removePairing, savePairing, setCurrentMachine, useStore, type DeviceKey } from '../src/e2ee/keys';

const unhex = (s: string) => Uint8Array.from(s.match(/../g) ?? [], (x) => parseInt(x, 16));
const hex = (b: Uint8Array) => Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
const utf8 = (s: string) => new TextEncoder().encode(s);
const text = (b: Uint8Array) => new TextDecoder().decode(b);

const device: DeviceKey = { private: unhex(v.device.private), publicKey: unhex(v.device.public) };
const machinePub = unhex(v.machine.public);
const machineId = v.ik.machine_id;
const hello = JSON.parse(v.ik.hello) as { name: string; version: string };

/** A carrier whose peer is the test: sent keeps what the device sends, inbox what it receives. */
class Script implements Carrier {
  sent: Uint8Array[] = [];
  inbox = new Inbox();
  closed = false;
  send(m: Uint8Array) {
    if (this.closed) throw new ChannelError('CLOSED', 'closed');
    this.sent.push(m.slice());
  }
  recv() {
    return this.inbox.next();
  }
  close() {
    this.closed = true;
    this.inbox.end();
  }
}

const tick = () => new Promise((r) => setTimeout(r, 0));

test('e2ee: fingerprints as Go writes them', () => {
  assert.equal(fingerprint(unhex(v.fingerprint.public)), v.fingerprint.fingerprint);
  assert.equal(fingerprintId(unhex(v.fingerprint.public)), v.fingerprint.id);
  assert.match(v.fingerprint.fingerprint, /^([0-9a-f]{4} ){15}[0-9a-f]{4}$/);
});

test('e2ee: the pairing code parses as Go wrote it, and formats back', () => {
  const c = parsePairingCode('  ' + v.pair.code + '\n');
  assert.equal(c.machineId, v.pair.machine_id);
  assert.equal(c.relay, v.pair.relay);
  assert.equal(c.offer, v.pair.offer);
  assert.equal(hex(c.secret), v.pair.secret);
  assert.equal(c.ticket, v.pair.ticket);
  assert.equal(c.fingerprint, v.pair.fingerprint);
  assert.equal(formatPairingCode(c), v.pair.code);
  assert.equal(hex(pairingPSK(c.secret, c.machineId, c.offer)), v.pair.psk);
});

test('e2ee: a bad pairing code says what is wrong', () => {
  const bad = (s: string, re: RegExp) => {
    assert.throws(() => parsePairingCode(s), (e: unknown) => e instanceof PairingCodeError && re.test((e as Error).message), s);
  };
  const body = v.pair.code.slice('betcode-pair:1:'.length);
  bad('', /it is empty/);
  bad('hello', /does not start with "betcode-pair:"/);
  bad('betcode-pair:', /no version/);
  bad('betcode-pair:x:' + body, /version "x" is not a number/);
  bad('betcode-pair:2:' + body, /it is version 2, and this betcode reads version 1/);
  bad('betcode-pair:1:' + body + '=', /not base64url/);
  bad('betcode-pair:1:' + body.slice(0, 4), /too short/);
  const i = 40;
  const altered = body.slice(0, i) + (body[i] === 'A' ? 'B' : 'A') + body.slice(i + 1);
  bad('betcode-pair:1:' + altered, /checksum does not match/);
  bad('betcode-pair:1:' + body.slice(0, -8), /not base64url|checksum|too short/);
  bad('x'.repeat(3000), /more than a pairing code's 2048/);
  const c = parsePairingCode(v.pair.code);
  bad(formatPairingCode({ ...c, secret: new Uint8Array(8) }), /secret is 8 bytes; a pairing needs at least 16/);
  bad(formatPairingCode({ ...c, relay: 'relay.example.com' }), /relay "relay.example.com" is not host:port/);
  bad(formatPairingCode({ ...c, ticket: 'a b' }), /ticket has a character that is not printable ASCII \(at byte 1\)/);
  bad(formatPairingCode({ ...c, machineId: '' }), /no machine id/);
  bad(formatPairingCode({ ...c, offer: 'xyz' }), /offer is 0 bytes, not 8/);
  assert.deepEqual(splitHostPort('[::1]:443'), ['::1', '443']);
  assert.equal(splitHostPort('::1:443'), undefined);
  assert.deepEqual(splitHostPort('a:'), ['a', '']);
});

test('e2ee: base64 as Go encodes it', () => {
  for (const n of [0, 1, 2, 3, 31, 32, 33]) {
    const b = Uint8Array.from({ length: n }, (_, i) => (i * 37 + 11) & 255);
    assert.equal(base64(b), Buffer.from(b).toString('base64'));
    assert.deepEqual(unbase64(base64(b)), b);
  }
  assert.throws(() => unbase64('abc'));
  assert.throws(() => unbase64('ab=='.replace('b', 'c'))); // non-zero trailing bits: not canonical
});

test('e2ee: Noise_IK makes Go\'s messages from the same keys', async () => {
  const hs = new HandshakeState({
    pattern: IK,
    initiator: true,
    prologue: utf8('betcode e2ee v1 open\x00' + machineId),
    s: new BytesKey(unhex(v.device.private)),
    rs: machinePub,
    ephemeral: unhex(v.ik.device_ephemeral),
  });
  const m1 = await hs.writeMessage(utf8(v.ik.hello));
  assert.equal(hex(m1.message), v.ik.msg1);
  const r = await hs.readMessage(unhex(v.ik.msg2));
  assert.deepEqual([...r.payload], [0]);
  assert.ok(r.done);
  for (const m of v.ik.transport) {
    if (m.from === 'device') assert.equal(hex(r.done.send.encrypt(unhex(m.plaintext))), m.message);
    else assert.equal(hex(r.done.recv.decrypt(unhex(m.message))), m.plaintext);
  }
});

test('e2ee: the machine\'s side of Noise_IK opens Go\'s message 1 (a TS responder, for the loopback tests)', async () => {
  const hs = new HandshakeState({
    pattern: IK,
    initiator: false,
    prologue: utf8('betcode e2ee v1 open\x00' + machineId),
    s: new BytesKey(unhex(v.machine.private)),
    ephemeral: unhex(v.ik.machine_ephemeral),
  });
  const r = await hs.readMessage(unhex(v.ik.msg1));
  assert.equal(text(r.payload), v.ik.hello);
  assert.equal(hex(hs.remoteStatic()!), v.device.public);
  const m2 = await hs.writeMessage(Uint8Array.of(0));
  assert.equal(hex(m2.message), v.ik.msg2);
});

test('e2ee: dial and the web/1 frames, byte for byte as Go', async () => {
  const c = new Script();
  c.inbox.push(unhex(v.ik.msg2));
  const ch = await dial(c, { machineId, machineKey: base64(machinePub), token: 't', deviceKey: device, hello }, unhex(v.ik.device_ephemeral));
  assert.equal(hex(c.sent[0]), v.ik.msg1);
  const a1 = ch.request('GET', '/sessions?limit=5');
  assert.equal(hex(c.sent[1]), v.ik.transport[0].message);
  c.inbox.push(unhex(v.ik.transport[1].message));
  assert.deepEqual(await a1, { status: 200, body: '{"sessions":[]}' });
  const a2 = ch.request('POST', '/sessions', '{"workspace":"w"}');
  assert.equal(hex(c.sent[2]), v.ik.transport[2].message);
  c.inbox.push(unhex(v.ik.transport[3].message)); // the answer and a ws frame in one message
  assert.deepEqual(await a2, { status: 201, body: '{}' });
  let end: ChannelError | undefined | null = null;
  ch.onclose = (e) => (end = e);
  c.inbox.end();
  await tick();
  await tick();
  assert.equal(ch.closed, true);
  assert.equal(end, undefined);
  await assert.rejects(ch.request('GET', '/x'), (e: unknown) => e instanceof ChannelError && e.code === 'CLOSED');
});

test('e2ee: a refusal carries the machine\'s reason', async () => {
  const c = new Script();
  c.inbox.push(unhex(v.ik_refused.msg2));
  await assert.rejects(
    dial(c, { machineId, machineKey: machinePub, token: 't', deviceKey: device, hello }, unhex(v.ik_refused.device_ephemeral)),
    (e: unknown) => e instanceof ChannelError && e.code === 'REFUSED' && e.message.endsWith(v.ik_refused.reason),
  );
  assert.equal(hex(c.sent[0]), v.ik_refused.msg1);
  assert.ok(c.closed);
});

test('e2ee: an altered answer, another machine id or a silent end fail the dial', async () => {
  const msg2 = unhex(v.ik.msg2);
  msg2[40] ^= 1;
  let c = new Script();
  c.inbox.push(msg2);
  await assert.rejects(
    dial(c, { machineId, machineKey: machinePub, token: 't', deviceKey: device, hello }, unhex(v.ik.device_ephemeral)),
    (e: unknown) => e instanceof ChannelError && e.code === 'HANDSHAKE',
  );
  c = new Script();
  c.inbox.push(unhex(v.ik.msg2));
  await assert.rejects(
    dial(c, { machineId: 'm-other', machineKey: machinePub, token: 't', deviceKey: device, hello }, unhex(v.ik.device_ephemeral)),
    (e: unknown) => e instanceof ChannelError && e.code === 'HANDSHAKE',
  );
  c = new Script();
  c.inbox.end();
  await assert.rejects(dial(c, { machineId, machineKey: machinePub, token: 't', deviceKey: device, hello }), (e: unknown) => e instanceof ChannelError && e.code === 'NO_ANSWER');
  c = new Script();
  c.inbox.end(closeError(4503, 'MACHINE_OFFLINE: the machine is not connected'));
  await assert.rejects(
    dial(c, { machineId, machineKey: machinePub, token: 't', deviceKey: device, hello }),
    (e: unknown) => e instanceof ChannelError && e.code === 'MACHINE_OFFLINE' && e.wsCode === 4503 && e.message === 'the machine is not connected',
  );
});

test('e2ee: the answer status byte as Go\'s parseAnswer', () => {
  assert.equal(parseAnswer(Uint8Array.of(0)), undefined);
  assert.equal(parseAnswer(concat(Uint8Array.of(1), utf8('no')))?.code, 'REFUSED');
  assert.throws(() => parseAnswer(new Uint8Array(0)), /empty/);
  assert.throws(() => parseAnswer(Uint8Array.of(0, 0)), /1 bytes after its status/);
  assert.throws(() => parseAnswer(Uint8Array.of(2)), /status 2/);
  assert.throws(() => parseAnswer(new Uint8Array(1026).fill(1)), /over the limit of 1024/);
});

test('e2ee: WebSocket close codes as BetCode errors', () => {
  assert.equal(closeError(1000, ''), undefined);
  const e = closeError(4401, 'UNAUTHENTICATED: the token was revoked')!;
  assert.deepEqual([e.code, e.wsCode, e.message], ['UNAUTHENTICATED', 4401, 'the token was revoked']);
  assert.deepEqual([closeError(4404, 'NotFound: x')!.code, closeError(4404, 'NotFound: x')!.message], ['NotFound', 'x']);
  assert.deepEqual([closeError(4429, 'slow down')!.code, closeError(4429, 'slow down')!.message], ['HTTP_429', 'slow down']);
  assert.equal(closeError(4503, 'UNAVAILABLE: down')!.code, 'UNAVAILABLE');
  assert.equal(closeError(1009, '')!.code, 'TOO_LARGE');
  assert.equal(closeError(1006, '')!.code, 'UNAVAILABLE');
});

test('e2ee: pairing makes Go\'s messages, and reads the Welcome', async () => {
  const c = new Script();
  c.inbox.push(unhex(v.pair.msg2));
  for (const m of v.pair.transport) if (m.from === 'machine') c.inbox.push(unhex(m.message));
  c.inbox.end();
  const code = parsePairingCode(v.pair.code);
  const p = await pairOver(c, { code, deviceKey: device, name: JSON.parse(v.pair.hello).name }, unhex(v.pair.device_ephemeral));
  assert.equal(hex(c.sent[0]), v.pair.msg1);
  assert.equal(hex(c.sent[1]), v.pair.msg3);
  assert.equal(hex(c.sent[2]), v.pair.transport[2].message);
  assert.equal(c.sent.length, 3);
  assert.equal(p.machineId, v.pair.machine_id);
  assert.equal(p.machineName, 'vector box');
  assert.equal(p.deviceId, 'd-0123456789abcdef');
  assert.equal(p.token, 'bct_deviceToken0123456789');
  assert.equal(p.relay, v.pair.relay);
  assert.equal(p.machineKey, base64(machinePub));
  assert.equal(p.fingerprint, v.pair.fingerprint);
  assert.ok(!isNaN(Date.parse(p.pairedAt)));
  assert.ok(c.closed);
});

test('e2ee: pairing stops before sending its own key when the machine key does not match the code', async () => {
  const c = new Script();
  c.inbox.push(unhex(v.pair.msg2));
  const code = parsePairingCode(v.pair.code);
  const other = fingerprint(utf8('another key'));
  await assert.rejects(
    pairOver(c, { code: { ...code, fingerprint: other }, deviceKey: device, name: 'x' }, unhex(v.pair.device_ephemeral)),
    (e: unknown) => e instanceof ChannelError && e.code === 'KEY_MISMATCH',
  );
  assert.equal(c.sent.length, 1); // message 1 only: no s, no hello
  assert.ok(c.closed);
});

test('e2ee: pairing with a wrong secret or a machine that gives up fails as unauthenticated', async () => {
  const code = parsePairingCode(v.pair.code);
  let c = new Script();
  c.inbox.push(unhex(v.pair.msg2));
  c.inbox.end(); // the machine's message 3 fails, and it ends the call
  await assert.rejects(
    pairOver(c, { code: { ...code, secret: new Uint8Array(32).fill(7) }, deviceKey: device, name: 'x' }, unhex(v.pair.device_ephemeral)),
    (e: unknown) => e instanceof ChannelError && e.code === 'PAIRING_FAILED',
  );
  c = new Script();
  c.inbox.end();
  await assert.rejects(pairOver(c, { code, deviceKey: device, name: 'x' }), (e: unknown) => e instanceof ChannelError && e.code === 'PAIRING_FAILED');
});

test('e2ee: a sealed envelope is Go\'s Noise_X message', async () => {
  const msg = await seal(device, v.seal.machine_id, base64(machinePub), JSON.parse(v.seal.payload), unhex(v.seal.device_ephemeral));
  assert.equal(hex(msg), v.seal.message);
  // and the machine's side opens it
  const hs = new HandshakeState({ pattern: X, initiator: false, prologue: utf8(v.seal.prologue), s: new BytesKey(unhex(v.machine.private)) });
  const r = await hs.readMessage(msg);
  assert.equal(text(r.payload), v.seal.payload);
  assert.equal(hex(hs.remoteStatic()!), v.device.public);
});

test('e2ee: sealedPayload', () => {
  const p = sealedPayload('permission', { session_id: 's-1', request_id: 'r', behavior: 'allow', v: 9 });
  assert.deepEqual(Object.keys(p), ['v', 'id', 'at', 'kind', 'session_id', 'request_id', 'behavior']);
  assert.equal(p.v, 1);
  assert.match(p.id as string, /^[0-9a-f]{32}$/);
  assert.ok(Math.abs((p.at as number) - Date.now()) < 1000);
  assert.notEqual(sealedPayload('queue', {}).id, p.id);
});

test('e2ee: a WebCrypto X25519 key agrees with noble', async () => {
  const k = (await crypto.subtle.generateKey({ name: 'X25519' }, false, ['deriveBits'])) as CryptoKeyPair;
  const wk = new WebCryptoKey(k.privateKey, new Uint8Array(await crypto.subtle.exportKey('raw', k.publicKey)));
  const nk = BytesKey.generate();
  assert.equal(hex(await wk.dh(nk.publicKey)), hex(nk.dhSync(wk.publicKey)));
  // a low-order point fails on both sides, as in Go
  await assert.rejects(wk.dh(new Uint8Array(32)));
  assert.throws(() => nk.dhSync(new Uint8Array(32)));
});

test('e2ee: frames reassemble across messages and share them', () => {
  const a = encodeFrame({ t: 'ws', data: 'x'.repeat(70000) });
  const b = encodeFrame({ t: 'res', id: 3, status: 204, body: '' });
  const all = concat(a, b);
  const r = new FrameReader();
  const got = [];
  for (let i = 0; i < all.length; i += 997) got.push(...r.push(all.subarray(i, i + 997)));
  assert.equal(got.length, 2);
  assert.equal((got[0].data as string).length, 70000);
  assert.deepEqual(got[1], { t: 'res', id: 3, status: 204, body: '' });
  assert.throws(() => new FrameReader().push(Uint8Array.of(0xff, 0, 0, 0)), /over the limit/);
  assert.throws(() => new FrameReader().push(concat(Uint8Array.of(0, 0, 0, 1), utf8('{'))), /not JSON/);
});

/** A TS machine over a loopback carrier pair: the device's channel and the machine's ciphers. */
async function loopback(): Promise<{ ch: WebChannel; fromDevice: () => Promise<Record<string, unknown>[]>; toDevice: (f: Record<string, unknown>) => void; dev: Script; end: () => void }> {
  const dev = new Script();
  const mk = new BytesKey(unhex(v.machine.private));
  const hs = new HandshakeState({ pattern: IK, initiator: false, prologue: utf8('betcode e2ee v1 open\x00' + machineId), s: mk });
  const sent = dev.sent;
  let seen = 0;
  const p = dial(dev, { machineId, machineKey: machinePub, token: 't', deviceKey: device, hello });
  await tick();
  await hs.readMessage(sent[seen++]);
  const m2 = await hs.writeMessage(Uint8Array.of(0));
  dev.inbox.push(m2.message);
  const ch = await p;
  const { send, recv } = m2.done!;
  const reader = new FrameReader();
  return {
    ch,
    dev,
    fromDevice: async () => {
      await tick();
      const out = [];
      while (seen < sent.length) out.push(...reader.push(recv.decrypt(sent[seen++])));
      return out;
    },
    toDevice: (f) => dev.inbox.push(send.encrypt(encodeFrame(f as { t: string }))),
    end: () => dev.inbox.end(closeError(4401, 'UNAUTHENTICATED: the device was revoked')),
  };
}

test('e2ee: requests carry ids, big bodies split into 65519-byte messages, and an abort cancels', async () => {
  const l = await loopback();
  const ac = new AbortController();
  const slow = l.ch.request('GET', '/slow', undefined, ac.signal);
  const big = 'y'.repeat(200000);
  const put = l.ch.request('PUT', '/big', big);
  ac.abort();
  await assert.rejects(slow, (e: unknown) => (e as Error).name === 'AbortError');
  const before = l.dev.sent.length;
  const fs = await l.fromDevice();
  assert.ok(l.dev.sent.slice(1, before).every((m) => m.length <= 65535));
  assert.deepEqual(fs.map((f) => [f.t, f.id]), [['req', 1], ['req', 2], ['cancel', 1]]);
  assert.equal(fs[1].body, big);
  l.toDevice({ t: 'res', id: 1, status: 200, body: 'late' }); // cancelled: ignored
  l.toDevice({ t: 'res', id: 2, status: 413, body: '{"error":"too big"}' });
  assert.deepEqual(await put, { status: 413, body: '{"error":"too big"}' });
});

test('e2ee: the event socket behaves as the /api/ws WebSocket, and the channel\'s end reaches it', async () => {
  const l = await loopback();
  const ws = l.ch.openEvents([{ sessionId: 's-1', afterSequence: 4 }]);
  assert.equal(ws.readyState, 0);
  assert.throws(() => ws.send('early'));
  const got: string[] = [];
  const opened = new Promise((r) => (ws.onopen = r));
  ws.onmessage = (ev) => got.push(ev.data);
  const closed = new Promise<{ code: number; reason: string }>((r) => (ws.onclose = r));
  await opened;
  assert.equal(ws.readyState, 1);
  ws.send('{"type":"ping"}');
  assert.deepEqual(await l.fromDevice(), [
    { t: 'ws.open', subscriptions: [{ sessionId: 's-1', afterSequence: 4 }] },
    { t: 'ws', data: '{"type":"ping"}' },
  ]);
  l.toDevice({ t: 'ws', data: '{"type":"hello"}' });
  l.toDevice({ t: 'ws', data: '{"type":"pong"}' });
  await tick();
  assert.deepEqual(got, ['{"type":"hello"}', '{"type":"pong"}']);

  // The app closes it and opens another: the second opens once the machine confirmed the first's end.
  ws.close();
  const ws2 = l.ch.openEvents();
  await tick();
  assert.deepEqual(await l.fromDevice(), [{ t: 'ws.close' }]);
  assert.equal((await closed).code, 1000);
  l.toDevice({ t: 'ws', data: 'of the old socket' });
  l.toDevice({ t: 'ws.close', code: 1000, reason: '' });
  await tick();
  await tick();
  assert.deepEqual(await l.fromDevice(), [{ t: 'ws.open' }]);
  const got2: string[] = [];
  ws2.onmessage = (ev) => got2.push(ev.data);
  const closed2 = new Promise<{ code: number; reason: string; wasClean: boolean }>((r) => (ws2.onclose = r));
  l.toDevice({ t: 'ws', data: 'new' });
  await tick();
  assert.deepEqual(got2, ['new']);

  // The relay ends the channel: the socket closes with its code, as /api/ws's would.
  let chErr: ChannelError | undefined;
  l.ch.onclose = (e) => (chErr = e);
  l.end();
  const c2 = await closed2;
  assert.deepEqual([c2.code, c2.wasClean], [4401, false]);
  await tick();
  assert.equal(chErr?.code, 'UNAUTHENTICATED');
});

test('e2ee: a message that does not authenticate ends the channel', async () => {
  const l = await loopback();
  const r = l.ch.request('GET', '/x');
  const bad = new Uint8Array(40);
  l.dev.inbox.push(bad);
  await assert.rejects(r, (e: unknown) => e instanceof ChannelError && e.code === 'INTEGRITY');
  assert.ok(l.ch.closed);
});

test('e2ee: XXpsk3 from both TS sides agrees (and the pattern table is the spec\'s)', async () => {
  const psk = new Uint8Array(32).fill(3);
  const prologue = utf8('p');
  const i = new HandshakeState({ pattern: XXpsk3, initiator: true, prologue, s: BytesKey.generate(), psk });
  const r = new HandshakeState({ pattern: XXpsk3, initiator: false, prologue, s: BytesKey.generate() });
  await r.readMessage((await i.writeMessage(utf8('a'))).message);
  r.setPsk(psk);
  await i.readMessage((await r.writeMessage(new Uint8Array(0))).message);
  const m3 = await i.writeMessage(utf8('c'));
  const r3 = await r.readMessage(m3.message);
  assert.equal(text(r3.payload), 'c');
  assert.equal(text(r3.done!.recv.decrypt(m3.done!.send.encrypt(utf8('z')))), 'z');
});

test('e2ee: the device key is created once and kept; pairings are replaced by machine', async () => {
  const m = new Map<string, unknown>();
  useStore({ get: async <T,>(k: string) => m.get(k) as T | undefined, set: async (k, x) => void m.set(k, x), del: async (k) => void m.delete(k) });
  const [k1, k2] = await Promise.all([loadOrCreateDeviceKey(), loadOrCreateDeviceKey()]);
  const k3 = await loadOrCreateDeviceKey();
  assert.equal(k3, m.get('device-key'));
  assert.equal(k3.publicKey.length, 32);
  assert.ok(k3.privateKey || k3.private);
  if (k3.privateKey) assert.equal(k3.privateKey.extractable, false);
  assert.ok(k1.publicKey.length === 32 && k2.publicKey.length === 32);
  const p = { machineId: 'm-1', machineName: 'a', relay: 'r:443', machineKey: base64(machinePub), fingerprint: v.fingerprint.fingerprint, token: 't', deviceId: 'd', pairedAt: '2026-12-05T00:00:00Z' };
  await savePairing(p);
  await savePairing({ ...p, machineId: 'm-2' });
  await savePairing({ ...p, machineName: 'b' });
  assert.deepEqual((await listPairings()).map((x) => [x.machineId, x.machineName]), [['m-2', 'a'], ['m-1', 'b']]);
  assert.equal((await getPairing('m-1'))?.machineName, 'b');
  await removePairing('m-2');
  assert.deepEqual((await listPairings()).map((x) => x.machineId), ['m-1']);
  await setCurrentMachine('m-1');
  assert.equal(await getCurrentMachine(), 'm-1');
  await setCurrentMachine(undefined);
  assert.equal(await getCurrentMachine(), undefined);
});

/** A WebSocket stand-in: the test plays the relay. */
class FakeWS {
  static last: FakeWS;
  binaryType = 'blob';
  sent: (string | Uint8Array)[] = [];
  closedWith: number | undefined;
  onopen: (() => void) | null = null;
  onmessage: ((ev: { data: unknown }) => void) | null = null;
  onclose: ((ev: { code: number; reason: string }) => void) | null = null;
  constructor(readonly url: string) {
    FakeWS.last = this;
  }
  send(d: string | Uint8Array) {
    this.sent.push(typeof d === 'string' ? d : d.slice());
  }
  close(code = 1005) {
    this.closedWith ??= code;
  }
}

test('e2ee: over a WebSocket: the hello, then one binary message per Noise message; close codes become errors', async () => {
  const WS = FakeWS as unknown as new (url: string) => WebSocket;
  const p = openChannel({ machineId, machineKey: machinePub, token: 'bct_dev', deviceKey: device, hello, wsUrl: 'wss://relay/api/channel' }, WS);
  const ws = FakeWS.last;
  assert.equal(ws.url, 'wss://relay/api/channel');
  ws.onopen!();
  await tick();
  assert.equal(ws.binaryType, 'arraybuffer');
  assert.deepEqual(JSON.parse(ws.sent[0] as string), { type: 'hello', token: 'bct_dev', machine: machineId });
  assert.ok(ws.sent[1] instanceof Uint8Array && ws.sent[1].length > 32 + 48);
  ws.onclose!({ code: 4503, reason: 'MACHINE_OFFLINE: machine m-vectors01 is not connected' });
  await assert.rejects(p, (e: unknown) => e instanceof ChannelError && e.code === 'MACHINE_OFFLINE' && e.wsCode === 4503);

  // a text message after the hello is a protocol error
  const p2 = openChannel({ machineId, machineKey: machinePub, token: 't', deviceKey: device, hello, wsUrl: 'ws://x' }, WS);
  FakeWS.last.onopen!();
  await tick();
  FakeWS.last.onmessage!({ data: 'hi' });
  await assert.rejects(p2, (e: unknown) => e instanceof ChannelError && e.code === 'PROTOCOL');
  assert.equal(FakeWS.last.closedWith, 1000);

  // refused before it opened; and an abort
  const p3 = openChannel({ machineId, machineKey: machinePub, token: 't', deviceKey: device, hello, wsUrl: 'ws://x' }, WS);
  FakeWS.last.onclose!({ code: 1006, reason: '' });
  await assert.rejects(p3, (e: unknown) => e instanceof ChannelError && e.code === 'UNAVAILABLE');
  const ac = new AbortController();
  const p4 = openChannel({ machineId, machineKey: machinePub, token: 't', deviceKey: device, hello, wsUrl: 'ws://x', signal: ac.signal }, WS);
  ac.abort();
  await assert.rejects(p4, (e: unknown) => (e as Error).name === 'AbortError');

  // pairing goes to /api/pair with the code's ticket
  const p5 = pair({ code: v.pair.code, deviceKey: device, name: 'x', wsUrl: 'ws://relay/api/pair' }, WS);
  FakeWS.last.onopen!();
  await tick();
  assert.deepEqual(JSON.parse(FakeWS.last.sent[0] as string), { type: 'hello', token: v.pair.ticket, machine: v.pair.machine_id });
  FakeWS.last.onclose!({ code: 4403, reason: 'PERMISSION_DENIED: the ticket was spent' });
  await assert.rejects(p5, (e: unknown) => e instanceof ChannelError && e.code === 'PERMISSION_DENIED');
  assert.throws(() => parsePairingCode('nope'));
});
