// The browser's e2ee code as a peer of Go's, for shared/e2ee/webpeer_test.go: the Go test builds
// this file (vite build --ssr) and runs it with node. Noise messages travel on stdin/stdout, each a
// 4-byte big-endian length and its bytes; the outcome is one line "RESULT <json>" on stderr.
// argv[2] is the JSON of a Job.
import { dial, Inbox, pairOver, type Carrier } from '../src/e2ee/channel';
import { parsePairingCode, unbase64 } from '../src/e2ee/code';
import { generateDeviceKey, type DeviceKey } from '../src/e2ee/keys';
import { seal } from '../src/e2ee/seal';
import { sealedPayload } from '../src/e2ee/payload';
import { ChannelError } from '../src/e2ee/types';

interface Job {
  mode: 'dial' | 'pair' | 'seal';
  machineId?: string;
  machineKey?: string; // base64
  device?: string; // base64 private key; none: a new WebCrypto key
  code?: string;
  name?: string;
  fields?: Record<string, unknown>;
}

function stdioCarrier(): Carrier {
  const inbox = new Inbox();
  let buf = Buffer.alloc(0);
  process.stdin.on('data', (chunk: Buffer) => {
    buf = Buffer.concat([buf, chunk]);
    while (buf.length >= 4 && buf.length >= 4 + buf.readUInt32BE(0)) {
      const n = buf.readUInt32BE(0);
      inbox.push(new Uint8Array(buf.subarray(4, 4 + n)));
      buf = buf.subarray(4 + n);
    }
  });
  process.stdin.on('end', () => inbox.end());
  let closed = false;
  return {
    send(m) {
      if (closed) throw new ChannelError('CLOSED', 'closed');
      const h = Buffer.alloc(4);
      h.writeUInt32BE(m.length);
      process.stdout.write(Buffer.concat([h, m]));
    },
    recv: () => inbox.next(),
    close() {
      closed = true;
      inbox.end();
    },
  };
}

async function deviceKey(job: Job): Promise<DeviceKey> {
  if (!job.device) return generateDeviceKey();
  const { x25519 } = await import('@noble/curves/ed25519.js');
  const priv = unbase64(job.device);
  return { private: priv, publicKey: x25519.getPublicKey(priv) };
}

const b64 = (b: Uint8Array) => Buffer.from(b).toString('base64');

function waitFor(cond: () => boolean, what: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const t0 = Date.now();
    const iv = setInterval(() => {
      if (cond()) {
        clearInterval(iv);
        resolve();
      } else if (Date.now() - t0 > 10000) {
        clearInterval(iv);
        reject(new Error('timed out waiting for ' + what));
      }
    }, 5);
  });
}

async function runDial(job: Job, key: DeviceKey): Promise<unknown> {
  const ch = await dial(stdioCarrier(), {
    machineId: job.machineId!,
    machineKey: job.machineKey!,
    token: '',
    deviceKey: key,
    hello: { name: job.name ?? 'peer', version: 'web test' },
  });
  const out: Record<string, unknown> = { webcrypto: !!key.privateKey };
  const ac = new AbortController();
  const slow = ch.request('GET', '/slow', undefined, ac.signal).then(
    () => 'answered',
    (e: Error) => e.name,
  );
  const big = 'b'.repeat(150000);
  const [r1, r2] = await Promise.all([ch.request('GET', '/echo?x=1'), ch.request('POST', '/echo', big)]);
  ac.abort();
  out.slow = await slow;
  out.r1 = r1;
  out.r2 = { status: r2.status, body: JSON.parse(r2.body).body === big };
  const events: string[] = [];
  const ws = ch.openEvents([{ sessionId: 's-1', afterSequence: 3 }]);
  ws.onmessage = (ev) => events.push(ev.data);
  await new Promise((r) => (ws.onopen = r));
  ws.send('{"type":"ping"}');
  await waitFor(() => events.includes('{"type":"pong"}'), 'the pong');
  const closed = new Promise<{ code: number }>((r) => (ws.onclose = r));
  ws.close();
  out.wsClose = (await closed).code;
  // a second event socket opens once the machine confirmed the first's end
  const ws2 = ch.openEvents();
  const events2: string[] = [];
  ws2.onmessage = (ev) => events2.push(ev.data);
  await waitFor(() => events2.length >= 2, 'the second socket\'s hello');
  out.events = events;
  out.events2 = events2;
  // after the cancel the machine answers /count with what it saw
  out.count = await ch.request('GET', '/count');
  ch.close();
  return out;
}

async function main(): Promise<void> {
  const job = JSON.parse(process.argv[2]) as Job;
  const key = await deviceKey(job);
  let result: unknown;
  try {
    switch (job.mode) {
      case 'dial':
        result = { ok: true, publicKey: b64(key.publicKey), ...(await runDial(job, key) as object) };
        break;
      case 'pair': {
        const p = await pairOver(stdioCarrier(), { code: parsePairingCode(job.code!), deviceKey: key, name: job.name ?? 'peer' });
        result = { ok: true, publicKey: b64(key.publicKey), pairing: p };
        break;
      }
      case 'seal': {
        const c = stdioCarrier();
        const payload = sealedPayload('queue', job.fields ?? {});
        c.send(await seal(key, job.machineId!, job.machineKey!, payload));
        result = { ok: true, publicKey: b64(key.publicKey), payload };
        break;
      }
    }
  } catch (e) {
    const err = e as ChannelError;
    result = { ok: false, publicKey: b64(key.publicKey), code: err.code ?? '', error: err.message };
  }
  process.stderr.write('RESULT ' + JSON.stringify(result) + '\n');
  process.exit(0);
}

void main();
