/**
 * Redis back from an older snapshot (dst seed 1038807, with real parts). The snapshot (an RDB file
 * taken with SAVE) still says adapter `a` is loaded on the replica; the node unloaded it since, and
 * Redis recorded that end. Redis is killed and started again on the same port from that file. The
 * node that made the unload reads `a` there `unloading` until a poll of its own begun after the
 * return (src/adapters/own-unloads.ts, `sharedAgain`), so no request goes to the replica for `a`
 * before then: vLLM would answer 404 "The model `a` does not exist.".
 *
 * Real parts: redis-server (no automatic saves, its own directory and file name), a FleetRuntime and a
 * RouterService as in the plugin server, the HTTP replica simulator on loopback. The checks read the
 * replica's own records: its load and unload log, and what each completion request found there.
 * The node's scrapes are held (not timed) so that no poll begun after the return lands before the
 * request is decided.
 */
import { randomBytes } from 'node:crypto';
import type http from 'node:http';
import { parseRouterConfig } from '../../src/config/parse';
import type { Scrape } from '../../src/backends/replica-api';
import { RouterService } from '../../src/router/router';
import { FleetRuntime } from '../../src/runtime';
import type { FailoverFleetStore } from '../../src/fleet/redis/failover-store';
import { SimFleet, type SimReplica } from '../../sim/fleet';
import { sendVia } from '../helpers/core-harness';
import { collectingLogger } from '../helpers/log';
import { RedisServer } from '../../harness/redis/server';
import { stateInRedis } from '../helpers/redis-stores';
import { waitFor } from '../../harness/wait';

const BASE = 'meta-llama/Llama-3.1-8B-Instruct';

let redis: RedisServer;
let fleet: SimFleet | undefined;
const runtimes: FleetRuntime[] = [];

beforeAll(async () => {
  // The harness turns automatic saves off (`--save ""`) and gives the server a tmp `--dir`.
  redis = await RedisServer.start({ args: ['--dbfilename', 'older.rdb'] });
});
afterEach(async () => {
  for (const rt of runtimes.splice(0)) {
    rt.stop();
    await rt.store.close?.();
  }
  await fleet?.stop();
  fleet = undefined;
});
afterAll(async () => {
  await redis.close();
});

const chatBody = (model: string) => ({ model, messages: [{ role: 'user', content: 'hi' }], max_tokens: 1 });

/** A completion request as the replica saw it: the adapters it held on arrival, and its answer. */
interface Arrival {
  held: string[];
  status: number;
}

/** Every completion request reaching `replica` from now on, as it saw it. */
function arrivals(replica: SimReplica): Arrival[] {
  const seen: Arrival[] = [];
  replica.onRequest = (req: http.IncomingMessage, res: http.ServerResponse) => {
    if (!req.url?.startsWith('/v1/chat/completions')) return;
    const held = replica.registered();
    res.on('finish', () => seen.push({ held, status: res.statusCode }));
  };
  return seen;
}

/**
 * A node: a runtime on the shared state `prefix` and a router limited to one adapter per replica;
 * its scrapes can be held (`heldFromStart`: before its first poll).
 */
function node(prefix: string, url: string, settings: Record<string, unknown> = {}, heldFromStart = false) {
  const log = collectingLogger();
  const rt = new FleetRuntime({
    log,
    redis: redis.config(prefix, { node_ttl_ms: 2000, timeout: 500 }),
    poller: { intervalMs: 50, timeoutMs: 500 },
  });
  runtimes.push(rt);
  const scrapes = holdScrapes(rt, heldFromStart);
  const router = new RouterService(
    parseRouterConfig({
      replicas: [{ url }],
      base_model: BASE,
      adapter_path_template: '/adapters/{name}',
      max_loaded_adapters: 1,
      queue_timeout_ms: 10_000,
      ...settings,
    }),
    rt,
  );
  return { rt, router, log, scrapes, prefix };
}

/**
 * Holds the node's scrapes of replicas from `hold()` until `release()`: no poll lands meanwhile.
 * `quiet` once one is held and the shared clock reads of polls have answered: a poll reads it
 * beside its scrape (src/fleet/poller.ts), so a held one may still be reading it.
 */
function holdScrapes(rt: FleetRuntime, heldFromStart: boolean) {
  let open = () => {};
  let gate: Promise<void> | null = heldFromStart ? new Promise<void>((resolve) => (open = resolve)) : null;
  let held = 0;
  let reading = 0;
  const sharedTime = rt.store.sharedTime?.bind(rt.store);
  if (sharedTime)
    rt.store.sharedTime = () => {
      reading++;
      return sharedTime().finally(() => reading--);
    };
  const scrape = rt.api.scrape.bind(rt.api);
  rt.api.scrape = async (...args): Promise<Scrape> => {
    if (gate) {
      held++;
      await gate;
    }
    return scrape(...args);
  };
  return {
    hold: () => (gate = new Promise<void>((resolve) => (open = resolve))),
    release: () => {
      gate = null;
      open();
    },
    get held() {
      return held;
    },
    get quiet() {
      return held > 0 && reading === 0;
    },
  };
}

/**
 * What Redis itself says of `name` on `url` under the node's prefix, not read through the node,
 * which reads its local state while it decides alone (a call past its timeout on a busy machine
 * puts it there again).
 */
const stateOf = (n: { prefix: string }, url: string, name: string) =>
  stateInRedis(redis, n.prefix, url, name);

/**
 * Loads `a` through the node, saves the snapshot, makes room for `b` (the node unloads `a`) and
 * waits until Redis recorded that end: the snapshot on disk is now older than the unload.
 */
async function unloadAfterSnapshot(n: ReturnType<typeof node>, replica: SimReplica): Promise<void> {
  const url = replica.url;
  await waitFor(() => n.rt.poller.stats.polls > 1, 5000, 'first polls');
  expect((await sendVia(n.router, '/v1/chat/completions', chatBody('a'))).status).toBe(200);
  await waitFor(async () => (await stateOf(n, url, 'a')) === 'loaded', 5000, '`a` loaded in Redis');
  expect(await redis.command(['SAVE'])).toBe('OK');

  expect((await sendVia(n.router, '/v1/chat/completions', chatBody('b'))).status).toBe(200);
  const log = replica.adapterLog().map((e) => `${e.op} ${e.name} ${e.status}`);
  expect(log).toEqual(['load a 200', 'unload a 200', 'load b 200']);
  await waitFor(async () => (await stateOf(n, url, 'a')) === undefined, 5000, 'the unload of `a` in Redis');
}

/** Kills redis-server and starts it again on its port, from the older snapshot on disk. */
async function restartFromSnapshot(): Promise<void> {
  await redis.stop();
  await redis.start();
}

/**
 * Decides a request for `a` on `n` while its scrapes are held, then lets polls go on (once it
 * is decided, or waits for room) and proxies it as Kong would, releasing it with the replica's
 * status as the log phase does. What the replica saw of the completion requests meanwhile, and
 * its adapter log since.
 */
async function requestForA(n: ReturnType<typeof node>, replica: SimReplica) {
  const seen = arrivals(replica);
  const logMark = replica.adapterLog().length;
  // Its decision comes (onto the replica, at once), or it waits for the unload's end as for the
  // store's `unloading` entry.
  let waiting!: () => void;
  const waits = new Promise<void>((resolve) => (waiting = resolve));
  const wait = n.rt.manager.roomChanged.wait.bind(n.rt.manager.roomChanged);
  n.rt.manager.roomChanged.wait = (...args) => {
    waiting();
    return wait(...args);
  };
  const decided = n.router.route({
    path: '/v1/chat/completions',
    body: Buffer.from(JSON.stringify(chatBody('a'))),
  });
  await Promise.race([decided, waits]);
  // Polls go on: the next one begun after the return reads `b` there, not `a`.
  n.scrapes.release();
  const outcome = await decided;
  if (outcome.kind !== 'proxy') throw new Error(`not proxied: ${JSON.stringify(outcome)}`);
  const res = await fetch(`${outcome.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: outcome.body ?? JSON.stringify(chatBody('a')),
    signal: AbortSignal.timeout(20_000),
  });
  const status = res.status;
  await res.text();
  await n.router.finish(outcome.leaseId, status);
  return { seen, status, since: replica.adapterLog().slice(logMark) };
}

it('the node that unloaded an adapter routes no request for it to that replica after Redis is back from an older snapshot, until a poll begun after the return', async () => {
  fleet = await SimFleet.start([{ adapterDirs: ['/adapters'], timeScale: 1, engine: { loadBaseMs: 20 } }]);
  const replica = fleet.replicas[0]!;
  const url = replica.url;
  const n = node(`sr${randomBytes(4).toString('hex')}:`, url);
  await unloadAfterSnapshot(n, replica);

  // Redis goes away; the node's polls find it gone and it decides alone.
  await redis.stop();
  await waitFor(() => n.rt.store.mode?.() === 'local', 5000, 'the node deciding alone');
  // From here no poll of the node lands until released: the one under way began before the return.
  n.scrapes.hold();
  await waitFor(() => n.scrapes.held > 0, 5000, 'a scrape held');
  await redis.start();
  await waitFor(
    () => n.log.lines.some((l) => l.includes('shared fleet state is back')),
    10_000,
    'the node sharing decisions again',
  );
  // The scenario: Redis, back from the snapshot, says `a` is loaded; the replica dropped it.
  expect(await stateOf(n, url, 'a')).toBe('loaded');
  expect(replica.registered()).toEqual(['b']);

  const { seen, status, since } = await requestForA(n, replica);

  // From the replica's records: every request reaching it since the restart found `a` there and
  // was served. On the code without `sharedAgain`: `[{ held: ['b'], status: 404 }]`, vLLM's
  // "The model `a` does not exist."
  expect(seen).toEqual([{ held: ['a'], status: 200 }]);
  expect(status).toBe(200);
  // `a` came back by a load the node made after the return, after `b` was unloaded for it.
  expect(since.map((e) => `${e.op} ${e.name} ${e.status}`)).toEqual(['unload b 200', 'load a 200']);
  const served = replica.requestRecords().filter((r) => r.adapter === 'a');
  expect(served.at(-1)!.arrival).toBeGreaterThanOrEqual(since[1]!.at);
}, 60_000);

it('a second restart from the snapshot during the recovery from the first: the node still routes no request for the adapter it unloaded (review 58)', async () => {
  fleet = await SimFleet.start([{ adapterDirs: ['/adapters'], timeScale: 1, engine: { loadBaseMs: 20 } }]);
  const replica = fleet.replicas[0]!;
  const url = replica.url;
  const n = node(`sr${randomBytes(4).toString('hex')}:`, url);
  await unloadAfterSnapshot(n, replica);

  await redis.stop();
  await waitFor(() => n.rt.store.mode?.() === 'local', 5000, 'the node deciding alone');
  n.scrapes.hold();
  await waitFor(() => n.scrapes.held > 0, 5000, 'a scrape held');
  // The recovery's first write (its registration) meets Redis restarting again, from the same file.
  const shared = (n.rt.store as FailoverFleetStore).shared;
  const upsert = shared.upsertReplica.bind(shared);
  let restarts = 0;
  shared.upsertReplica = async (spec) => {
    if (restarts++ === 0) await restartFromSnapshot();
    return upsert(spec);
  };
  await redis.start();
  await waitFor(
    () => n.log.lines.some((l) => l.includes('shared fleet state is back')),
    20_000,
    'the node sharing decisions again',
  );
  expect(restarts).toBeGreaterThan(1);
  expect(await stateOf(n, url, 'a')).toBe('loaded');
  expect(replica.registered()).toEqual(['b']);

  const { seen, status } = await requestForA(n, replica);
  expect(seen).toEqual([{ held: ['a'], status: 200 }]);
  expect(status).toBe(200);
}, 60_000);

it('a restart no decision of the node saw fail is found by the server it reached (its run_id), and reads the same', async () => {
  fleet = await SimFleet.start([{ adapterDirs: ['/adapters'], timeScale: 1, engine: { loadBaseMs: 20 } }]);
  const replica = fleet.replicas[0]!;
  const url = replica.url;
  const n = node(`sr${randomBytes(4).toString('hex')}:`, url);
  await unloadAfterSnapshot(n, replica);

  // The node is idle and its polls are held: nothing it decides meets Redis while it is away.
  n.scrapes.hold();
  await waitFor(() => n.scrapes.quiet, 5000, 'a scrape held, its shared clock read answered');
  await restartFromSnapshot();
  // Its next call (the heartbeat, every node_ttl_ms / 4) finds another server answering
  // (src/fleet/redis/connection.ts, `run_id`): the node takes its state there again, as after an outage.
  await waitFor(
    () => n.log.lines.some((l) => l.includes('shared fleet state is back')),
    10_000,
    'the node sharing decisions again',
  );
  expect(n.log.lines.filter((l) => l.startsWith('error: ')).join('\n')).toContain(
    'another Redis server answers',
  );
  expect(await stateOf(n, url, 'a')).toBe('loaded');

  const { seen, status } = await requestForA(n, replica);
  expect(seen).toEqual([{ held: ['a'], status: 200 }]);
  expect(status).toBe(200);
}, 60_000);

describe('a node process restarted too (a new runtime) knows nothing of the old one’s unloads', () => {
  /** Node 1 unloads `a` after the snapshot and its process ends; Redis restarts from the snapshot. */
  async function restartBoth(prefix: string, replica: SimReplica): Promise<void> {
    const first = node(prefix, replica.url);
    await unloadAfterSnapshot(first, replica);
    first.rt.stop();
    await first.rt.store.close?.();
    await restartFromSnapshot();
  }

  it('its requests before its first poll go where the snapshot says, while the snapshot’s last poll is younger than stale_after_ms', async () => {
    fleet = await SimFleet.start([{ adapterDirs: ['/adapters'], timeScale: 1, engine: { loadBaseMs: 20 } }]);
    const replica = fleet.replicas[0]!;
    const prefix = `sr${randomBytes(4).toString('hex')}:`;
    await restartBoth(prefix, replica);
    // The new process: none of its polls lands before its first request is decided.
    const n = node(prefix, replica.url, { stale_after_ms: 60_000 }, true);
    expect(await stateOf(n, replica.url, 'a')).toBe('loaded');

    const { seen, status } = await requestForA(n, replica);
    // The documented gap (docs/reliability.md, "A replica restart"): vLLM's 404 for `a`.
    expect(seen).toEqual([{ held: ['b'], status: 404 }]);
    expect(status).toBe(404);
  }, 60_000);

  it('older than stale_after_ms, it polls the replica before the decision and the request finds its adapter', async () => {
    fleet = await SimFleet.start([{ adapterDirs: ['/adapters'], timeScale: 1, engine: { loadBaseMs: 20 } }]);
    const replica = fleet.replicas[0]!;
    const prefix = `sr${randomBytes(4).toString('hex')}:`;
    await restartBoth(prefix, replica);
    const staleAfterMs = 300;
    // No poll of the new process lands until the snapshot's last poll is that old.
    const n = node(prefix, replica.url, { stale_after_ms: staleAfterMs, refresh_timeout_ms: 10_000 }, true);
    const polledAt = async () => (await n.rt.store.views([replica.url]))[0]?.snapshotAt ?? Date.now();
    await waitFor(async () => Date.now() - (await polledAt()) > staleAfterMs, 5000, 'the snapshot stale');
    // Polls land once the router asks for one before its decision (src/router/stale-refresh.ts).
    let refreshes = 0;
    const refresh = n.rt.poller.refresh.bind(n.rt.poller);
    n.rt.poller.refresh = (spec) => {
      refreshes++;
      n.scrapes.release();
      return refresh(spec);
    };
    const { seen, status } = await requestForA(n, replica);
    expect(refreshes).toBeGreaterThan(0);
    expect(seen).toEqual([{ held: ['a'], status: 200 }]);
    expect(status).toBe(200);
  }, 60_000);
});
