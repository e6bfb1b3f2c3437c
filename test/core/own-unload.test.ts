/**
 * A node never routes onto its own unload under way (dst seed 741908). Redis loses the unload's
 * `unloading` entry while the node's call to the replica runs (here FLUSHALL), and the next poll
 * writes back what the replica still lists: the adapter, `loaded`. The node knows its own call
 * regardless: a request for that adapter decided meanwhile waits for the unload as for the store's
 * entry, rather than reach the replica after the drop and get vLLM's 404. Real parts: a FleetRuntime
 * on a real redis-server and a RouterService as in the plugin server, the HTTP replica simulator;
 * the unload call is held (not timed) until the request has been decided or waits.
 */
import { randomBytes } from 'node:crypto';
import { parseRouterConfig } from '../../src/config/parse';
import { silentLogger } from '../../src/log';
import { RouterService } from '../../src/router/router';
import { FleetRuntime } from '../../src/runtime';
import { SimFleet } from '../../sim/fleet';
import { sendVia } from '../helpers/core-harness';
import { RedisServer } from '../../harness/redis/server';
import { waitFor } from '../../harness/wait';

const BASE = 'meta-llama/Llama-3.1-8B-Instruct';

let redis: RedisServer;
let fleet: SimFleet | undefined;
let rt: FleetRuntime | undefined;

beforeAll(async () => {
  redis = await RedisServer.start();
});
afterEach(async () => {
  rt?.stop();
  await rt?.store.close?.();
  rt = undefined;
  await fleet?.stop();
  fleet = undefined;
});
afterAll(async () => {
  await redis.close();
});

const chatBody = (model: string) => ({ model, messages: [{ role: 'user', content: 'hi' }], max_tokens: 1 });

it('a request for an adapter this node is unloading is not routed there when Redis lost the unload and a poll wrote it back loaded', async () => {
  fleet = await SimFleet.start([{ adapterDirs: ['/adapters'], timeScale: 1, engine: { loadBaseMs: 20 } }]);
  const url = fleet.urls[0]!;
  rt = new FleetRuntime({
    log: silentLogger,
    redis: redis.config(`ou${randomBytes(4).toString('hex')}:`, { node_ttl_ms: 1000, timeout: 500 }),
    poller: { intervalMs: 50, timeoutMs: 500 },
  });
  const node = rt;
  const router = new RouterService(
    parseRouterConfig({
      replicas: [{ url }],
      base_model: BASE,
      adapter_path_template: '/adapters/{name}',
      max_loaded_adapters: 1,
      queue_timeout_ms: 10_000,
    }),
    node,
  );
  await waitFor(() => node.poller.stats.polls > 1, 5000, 'first polls');
  expect((await sendVia(router, '/v1/chat/completions', chatBody('a'))).status).toBe(200);

  // The next unload call is held before it reaches the replica.
  let held!: () => void;
  const unloadHeld = new Promise<void>((resolve) => (held = resolve));
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  const unloadAdapter = node.api.unloadAdapter.bind(node.api);
  node.api.unloadAdapter = async (u, name, timeoutMs) => {
    held();
    await released;
    return unloadAdapter(u, name, timeoutMs);
  };
  // A request for `b` makes room: this node unloads `a` (granted, `unloading` in Redis).
  const forB = sendVia(router, '/v1/chat/completions', chatBody('b'));
  forB.catch(() => undefined);
  await unloadHeld;
  await waitFor(
    async () => (await node.store.views([url], { name: 'a' }))[0]?.adapter?.state === 'unloading',
    5000,
    'the unload recorded in Redis',
  );

  // Redis loses it; the node registers the replica again and polls it: `a` is listed, `loaded`.
  await redis.command(['FLUSHALL']);
  await waitFor(
    async () => (await node.store.views([url], { name: 'a' }))[0]?.adapter?.state === 'loaded',
    10_000,
    'a poll writing `a` back loaded',
  );

  // The request for `a`, decided now. Its decision comes (unchanged: onto the replica, at once), or it
  // waits for room (as for an `unloading` entry): then the unload reaches the replica.
  let waiting!: () => void;
  const waits = new Promise<void>((resolve) => (waiting = resolve));
  const wait = node.manager.roomChanged.wait.bind(node.manager.roomChanged);
  node.manager.roomChanged.wait = (...args) => {
    waiting();
    return wait(...args);
  };
  const decided = router.route({
    path: '/v1/chat/completions',
    body: Buffer.from(JSON.stringify(chatBody('a'))),
  });
  await Promise.race([decided, waits]);
  release();
  await waitFor(
    () =>
      fleet!.replicas[0]!.adapterLog().some((e) => e.op === 'unload' && e.name === 'a' && e.status === 200),
    5000,
    'the replica dropping `a`',
  );
  const outcome = await decided;
  expect(outcome.kind).toBe('proxy');
  if (outcome.kind !== 'proxy') return;
  // Proxied as Kong would, once the replica dropped `a`: it must serve `a` there.
  const res = await fetch(`${outcome.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: outcome.body ?? JSON.stringify(chatBody('a')),
    signal: AbortSignal.timeout(20_000),
  });
  const answer = { status: res.status, text: await res.text() };
  // vLLM's 404 "The model `a` does not exist." on unchanged code: decided on the stale `loaded`.
  await router.finish(outcome.leaseId, answer.status);
  expect(answer.status === 200 ? 'served' : answer.text).toBe('served');
  expect((await forB).status).toBe(200);
}, 30_000);

it('a request waiting on the old runtime for its own unload whose end Redis lost is not routed there after a `redis` record change to other state polls the replica', async () => {
  // dst seed 741908 under another timer order: node 1 unloaded `med` (its end lost to a FLUSHALL),
  // moved to db 1, and a request still deciding on db 0 read the stale `loaded` there once the
  // db 1 poll had cleared the node's own record of the unload: vLLM's 404.
  fleet = await SimFleet.start([{ adapterDirs: ['/adapters'], timeScale: 1, engine: { loadBaseMs: 20 } }]);
  const url = fleet.urls[0]!;
  const config = (prefix: string) =>
    parseRouterConfig({
      replicas: [{ url }],
      base_model: BASE,
      adapter_path_template: '/adapters/{name}',
      max_loaded_adapters: 1,
      queue_timeout_ms: 10_000,
      redis: redis.config(prefix, { node_ttl_ms: 1000, timeout: 500 }),
    });
  const runtime = (prefix: string) =>
    new FleetRuntime({
      log: silentLogger,
      redis: redis.config(prefix, { node_ttl_ms: 1000, timeout: 500 }),
      poller: { intervalMs: 50, timeoutMs: 500 },
    });
  const [pOld, pNew] = [`ou${randomBytes(4).toString('hex')}:`, `ou${randomBytes(4).toString('hex')}:`];
  rt = runtime(pOld);
  const node = rt;
  const router = new RouterService(config(pOld), node);
  await waitFor(() => node.poller.stats.polls > 1, 5000, 'first polls');
  expect((await sendVia(router, '/v1/chat/completions', chatBody('a'))).status).toBe(200);

  // The unload of `a` that a request for `b` makes is held before it reaches the replica.
  let held!: () => void;
  const unloadHeld = new Promise<void>((resolve) => (held = resolve));
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  const unloadAdapter = node.api.unloadAdapter.bind(node.api);
  node.api.unloadAdapter = async (u, name, timeoutMs) => {
    held();
    await released;
    return unloadAdapter(u, name, timeoutMs);
  };
  const forB = sendVia(router, '/v1/chat/completions', chatBody('b'));
  forB.catch(() => undefined);
  await unloadHeld;
  // Redis loses the unload; a poll writes `a` back loaded.
  await redis.command(['FLUSHALL']);
  await waitFor(
    async () => (await node.store.views([url], { name: 'a' }))[0]?.adapter?.state === 'loaded',
    10_000,
    'a poll writing `a` back loaded',
  );
  // A request for `a` waits on the old runtime for the node's own unload.
  let waiting!: () => void;
  const waits = new Promise<void>((resolve) => (waiting = resolve));
  const wait = node.manager.roomChanged.wait.bind(node.manager.roomChanged);
  node.manager.roomChanged.wait = (...args) => {
    waiting();
    return wait(...args);
  };
  const decided = router.route({
    path: '/v1/chat/completions',
    body: Buffer.from(JSON.stringify(chatBody('a'))),
  });
  await Promise.race([decided, waits]);

  // The `redis` record changes to other state; the new runtime polls the replica.
  const next = runtime(pNew);
  new RouterService(config(pNew), next);
  const retired = node.retire(next);
  retired.catch(() => undefined);
  // The replica drops `a`; its end is refused by the old store (the lock was flushed).
  release();
  await waitFor(
    () =>
      fleet!.replicas[0]!.adapterLog().some((e) => e.op === 'unload' && e.name === 'a' && e.status === 200),
    5000,
    'the replica dropping `a`',
  );
  const polls = next.poller.stats.polls;
  await waitFor(() => next.poller.stats.polls > polls + 1, 5000, 'the new runtime polling after the drop');
  const outcome = await decided;
  try {
    expect(outcome.kind).toBe('proxy');
    if (outcome.kind !== 'proxy') return;
    const res = await fetch(`${outcome.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: outcome.body ?? JSON.stringify(chatBody('a')),
      signal: AbortSignal.timeout(20_000),
    });
    const answer = { status: res.status, text: await res.text() };
    await router.finish(outcome.leaseId, answer.status);
    // The wait for the unload ended as a wait for room does there: decided again on the new
    // runtime, not left reading `unloading` in a store no poll reads again (503 at the deadline).
    expect(outcome.leaseId.startsWith(`${next.leasePrefix}-`)).toBe(true);
    // vLLM's 404 "The model `a` does not exist." on unchanged code: decided on the old store's stale `loaded`.
    expect(answer.status === 200 ? 'served' : answer.text).toBe('served');
  } finally {
    next.stop();
    await next.store.close?.();
  }
}, 30_000);
