// api.ts: which calls go through a paired machine's channel, and how its answers decode.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { api, ApiError, get, isRelayPath, post, setAuth, setChannel } from '../src/api';

test('relay calls stay plain, machine calls are the channel\'s', () => {
  for (const p of ['/me', '/info', '/machines', '/machines/m1/switch', '/push', '/push/test', '/oidc/device', '/oidc/device/poll', '/health'])
    assert.ok(isRelayPath(p), p);
  for (const p of ['/sessions', '/sessions?limit=5', '/sessions/s1/permissions/r1', '/push/subscriptions', '/push/subscriptions/x', '/permission-rules', '/usage', '/dirs/validate?path=/x', '/meetings', '/machinesx'])
    assert.ok(!isRelayPath(p), p);
});

test('api routes machine calls through the channel and decodes its answers', async () => {
  const seen: string[] = [];
  const fetched: string[] = [];
  const realFetch = globalThis.fetch;
  globalThis.fetch = (async (url: string) => {
    fetched.push(url);
    return new Response('{"userId":"u"}', { status: 200 });
  }) as typeof fetch;
  setAuth('tok', 'm1');
  setChannel(async (method, path, body) => {
    seen.push(`${method} ${path} ${body ?? ''}`);
    if (path === '/sessions') return { status: 200, body: '[{"id":"s1"}]' };
    if (path === '/sessions/s1/stop') return { status: 204, body: '' };
    return { status: 409, body: '{"error":"already answered","code":"PERMISSION_NOT_PENDING"}' };
  });
  try {
    assert.deepEqual(await get('/sessions'), [{ id: 's1' }]);
    assert.equal(await post('/sessions/s1/stop'), undefined);
    await assert.rejects(post('/sessions/s1/permissions/r1', { behavior: 'allow' }), (e: unknown) =>
      e instanceof ApiError && e.status === 409 && e.code === 'PERMISSION_NOT_PENDING' && e.message === 'already answered');
    assert.deepEqual(await get('/me'), { userId: 'u' });
    assert.deepEqual(seen, ['GET /sessions ', 'POST /sessions/s1/stop {}', 'POST /sessions/s1/permissions/r1 {"behavior":"allow"}']);
    assert.deepEqual(fetched, ['/api/me']);
    // A channel that cannot open is a network-like error with the library's code and words.
    setChannel(async () => {
      throw Object.assign(new Error('the machine refused this device: revoked'), { code: 'REFUSED' });
    });
    await assert.rejects(api('GET', '/sessions'), (e: unknown) => e instanceof ApiError && e.status === 0 && e.code === 'REFUSED');
    setChannel(undefined);
    await get('/sessions');
    assert.deepEqual(fetched, ['/api/me', '/api/sessions']);
  } finally {
    setChannel(undefined);
    setAuth('', '');
    globalThis.fetch = realFetch;
  }
});
