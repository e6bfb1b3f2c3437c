import { mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import type { LoadOutcome, ReplicaApi, Scrape, UnloadOutcome } from '../src/backends/replica-api';
import type { ReplicaSpec } from '../src/fleet/types';
import { parseRouterConfig } from '../src/config/parse';
import { MemoryFleetStore } from '../src/fleet/memory-store';
import { seededRandom } from '../src/random';
import { defaultWeights, pipelineFor, SchedulingPipeline } from '../src/scheduler/pipeline';
import { prefixScorer } from '../src/scheduler/scorers/prefix';
import type { Candidate, Decision, SchedulingContext } from '../src/scheduler/types';
import { LoadTimes } from '../src/work/load-times';
import { predictTtft, scratchPrediction } from '../src/work/predict';
import { WorkModel } from '../src/work/work-model';
import { silentLogger } from '../src/log';
import { RouterService } from '../src/router/router';
import { FleetRuntime } from '../src/runtime';
import { RedisFleetStore } from '../src/fleet/redis/redis-store';
import { SimFleet } from '../sim/fleet';
import { KongDriver, KongRequest, PluginServerProcess } from '../harness/kong/driver';
import { RedisServer } from '../harness/redis/server';
import { percentile as pct } from '../sim/workload/percentile';

/** Median and p99 of one plugin's access event, log event, and both, in ms. */
export interface EventStats {
  accessP50: number;
  accessP99: number;
  logP50: number;
  logP99: number;
  totalP50: number;
  totalP99: number;
}

export interface OverheadRow {
  size: string;
  iterations: number;
  router: EventStats;
  noop: EventStats;
  ratioP50: number;
  ratioP99: number;
  pdkAccess: number;
  pdkLog: number;
}

const DIST = join(__dirname, '..');

/** access + log through the real plugin server: lora-router (adapter resident) vs the no-op plugin. */
export async function measureOverhead(
  iterations: Record<string, number>,
  log: (s: string) => void,
): Promise<OverheadRow[]> {
  const { fleet, driver, url, close } = await benchBed();
  try {
    const poller = await driver.startInstance('lora-poller', { poll_interval_ms: 200 });
    void poller;
    const router = await driver.startInstance('lora-router', {
      replicas: [{ url: fleet.urls[0] }],
      base_model: 'base',
      max_loaded_adapters: 4,
    });
    const noop = await driver.startInstance('lora-noop', { host: url.hostname, port: Number(url.port) });
    const rows: OverheadRow[] = [];
    for (const [size, n] of Object.entries(iterations)) {
      const bytes = size === '1 KB' ? 1024 : size === '100 KB' ? 100 * 1024 : 1024 * 1024;
      const body = chatBody(bytes);
      const run = (id: number) => timedRequest(driver, id, body);
      const warm = Math.min(50, n);
      for (let i = 0; i < warm; i++) {
        await run(router.Id);
        await run(noop.Id);
      }
      const a: { access: number; log: number }[] = [];
      const b: { access: number; log: number }[] = [];
      let calls = { access: 0, log: 0 };
      // Interleaved, so drift (GC, the other core) hits both alike.
      for (let i = 0; i < n; i++) {
        const r = await run(router.Id);
        a.push(r);
        // The most any request made, not the last one's: a request that took a slower path
        // (a refresh, a load) must count against the goal too.
        calls = {
          access: Math.max(calls.access, r.req.pdkCalls.access!.length),
          log: Math.max(calls.log, r.req.pdkCalls.log!.length),
        };
        b.push(await run(noop.Id));
      }
      const stats = (xs: { access: number; log: number }[]): EventStats => {
        const [access, log, total] = [
          xs.map((x) => x.access),
          xs.map((x) => x.log),
          xs.map((x) => x.access + x.log),
        ];
        return {
          accessP50: pct(access, 0.5),
          accessP99: pct(access, 0.99),
          logP50: pct(log, 0.5),
          logP99: pct(log, 0.99),
          totalP50: pct(total, 0.5),
          totalP99: pct(total, 0.99),
        };
      };
      const rs = stats(a);
      const ns = stats(b);
      rows.push({
        size,
        iterations: n,
        router: rs,
        noop: ns,
        ratioP50: rs.totalP50 / ns.totalP50,
        ratioP99: rs.totalP99 / ns.totalP99,
        pdkAccess: calls.access,
        pdkLog: calls.log,
      });
      log(
        `  ${size}: lora-router ${rs.totalP50.toFixed(3)} ms vs no-op ${ns.totalP50.toFixed(3)} ms (median access+log), ratio ${(rs.totalP50 / ns.totalP50).toFixed(3)}`,
      );
    }
    return rows;
  } finally {
    await close();
  }
}

/**
 * CPU time the plugin server spends on one access + log event pair at `bytes` of body, lora-router
 * (adapter resident) against the no-op plugin, µs: its process's user + system time over `n`
 * requests of each (interleaved in blocks, after a warm-up), from /proc. Counted rather than
 * timed: the driver's and other processes' time do not enter it. bench/profile-decision.ts.
 */
export async function pluginServerCpu(
  n: number,
  bytes = 1024,
): Promise<{ routerUs: number; noopUs: number }> {
  const { fleet, driver, url, close, server } = await benchBed();
  try {
    const router = await driver.startInstance('lora-router', {
      replicas: [{ url: fleet.urls[0] }],
      base_model: 'base',
      max_loaded_adapters: 4,
    });
    const noop = await driver.startInstance('lora-noop', { host: url.hostname, port: Number(url.port) });
    const body = chatBody(bytes);
    const pid = server.child.pid!;
    // utime + stime of the server process, clock ticks (100 a second on Linux).
    const ticks = () => {
      const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
      return Number(f[11]) + Number(f[12]);
    };
    for (let i = 0; i < 500; i++) {
      await timedRequest(driver, router.Id, body);
      await timedRequest(driver, noop.Id, body);
    }
    const spent = { [router.Id]: 0, [noop.Id]: 0 };
    const block = 500;
    for (let done = 0; done < n; done += block)
      for (const id of [router.Id, noop.Id]) {
        const t0 = ticks();
        for (let i = 0; i < block; i++) await timedRequest(driver, id, body);
        spent[id]! += ticks() - t0;
      }
    const us = (t: number) => (t * 10_000) / (Math.ceil(n / block) * block);
    return { routerUs: us(spent[router.Id]!), noopUs: us(spent[noop.Id]!) };
  } finally {
    await close();
  }
}

/** Median and p99 of access + log, and the median of access alone (what a client waits for), ms. */
export interface CostStats {
  p50: number;
  p99: number;
  accessP50: number;
}

export interface RedisCost {
  iterations: number;
  memory: CostStats;
  redis: CostStats;
  noop: CostStats;
}

/**
 * What shared state in Redis costs per request: lora-router with its fleet state in process vs
 * in a real redis-server on loopback (the adapter resident: the common path), interleaved in
 * one plugin server, with the no-op plugin as the floor.
 */
export async function measureRedisCost(iterations: number, log: (s: string) => void): Promise<RedisCost> {
  const redis = await RedisServer.start();
  const { fleet, driver, url, close } = await benchBed();
  try {
    const config = { replicas: [{ url: fleet.urls[0] }], base_model: 'base', max_loaded_adapters: 4 };
    const memory = await driver.startInstance('lora-router', config);
    const shared = await driver.startInstance('lora-router', {
      ...config,
      redis: redis.config('bench:'),
    });
    const noop = await driver.startInstance('lora-noop', { host: url.hostname, port: Number(url.port) });
    const body = chatBody(1024);
    const run = async (id: number) => {
      const t = await timedRequest(driver, id, body);
      return { total: t.access + t.log, access: t.access };
    };
    const ids = [memory.Id, shared.Id, noop.Id];
    const times: { total: number; access: number }[][] = [[], [], []];
    for (let i = 0; i < 50; i++) for (const id of ids) await run(id);
    for (let i = 0; i < iterations; i++)
      for (let k = 0; k < ids.length; k++) times[k]!.push(await run(ids[k]!));
    const st = (xs: { total: number; access: number }[]): CostStats => {
      const total = xs.map((x) => x.total);
      return {
        p50: pct(total, 0.5),
        p99: pct(total, 0.99),
        accessP50: pct(
          xs.map((x) => x.access),
          0.5,
        ),
      };
    };
    const r = { iterations, memory: st(times[0]!), redis: st(times[1]!), noop: st(times[2]!) };
    log(
      `  1 KB, adapter resident: in-process state ${r.memory.p50.toFixed(3)} ms, Redis ${r.redis.p50.toFixed(3)} ms, no-op ${r.noop.p50.toFixed(3)} ms (median access+log); access alone ${r.memory.accessP50.toFixed(3)} vs ${r.redis.accessP50.toFixed(3)} ms`,
    );
    return r;
  } finally {
    await close();
    await redis.close();
  }
}

/**
 * One replica holding the benchmark's adapter from start, and a real plugin server loading our
 * two plugins and the no-op plugin (`lora-noop`) from a directory of links to the build.
 */
async function benchBed() {
  const dir = mkdtempSync(join(tmpdir(), 'bench-plugins-'));
  symlinkSync(join(DIST, 'plugins', 'lora-router.js'), join(dir, 'lora-router.js'));
  symlinkSync(join(DIST, 'plugins', 'lora-poller.js'), join(dir, 'lora-poller.js'));
  symlinkSync(join(DIST, 'bench', 'noop-plugin.js'), join(dir, 'lora-noop.js'));
  // A context longer than the 1 MB body's ~260k tokens: the router refuses a request longer than
  // every replica's max_model_len, and this part measures the body's cost, not that refusal.
  const fleet = await SimFleet.start([
    { staticAdapters: [{ name: 'bench-adapter', path: '/adapters/bench-adapter' }], maxModelLen: 1 << 20 },
  ]);
  const server = await PluginServerProcess.start({ pluginsDir: dir });
  const driver = new KongDriver(server.socketPath);
  const close = async () => {
    driver.close();
    await server.stop();
    await fleet.stop();
    rmSync(dir, { recursive: true, force: true });
  };
  return { fleet, driver, url: new URL(fleet.urls[0]!), close, server };
}

/** One request's access and log events as Kong sends them (status 200), timed; fails on an exit. */
async function timedRequest(driver: KongDriver, id: number, body: Buffer) {
  const req = new KongRequest({ path: '/v1/chat/completions', body });
  const t0 = performance.now();
  await driver.handleEvent(id, 'access', req);
  const t1 = performance.now();
  req.status = 200;
  await driver.handleEvent(id, 'log', req);
  const t2 = performance.now();
  if (req.exit) throw new Error(`lora-router answered ${req.exit.status}: ${req.exit.body.toString()}`);
  return { access: t1 - t0, log: t2 - t1, req };
}

/** An OpenAI chat body of `bytes` bytes naming the benchmark's adapter. */
export function chatBody(bytes: number): Buffer {
  const head = '{"model":"bench-adapter","max_tokens":1,"messages":[{"role":"user","content":"';
  const tail = '"}]}';
  return Buffer.from(head + 'x'.repeat(Math.max(0, bytes - head.length - tail.length)) + tail);
}

/** A replica API answering from memory: memory benchmarks measure the core, not the network. */
class StaticApi implements ReplicaApi {
  /** `only`: the one replica that holds the adapters (else every replica holds them). */
  constructor(
    private readonly adapters: number,
    private readonly only?: string,
  ) {}
  async scrape(replica: ReplicaSpec): Promise<Scrape> {
    const n = this.only === undefined || replica.url === this.only ? this.adapters : 0;
    return {
      load: { waiting: 0, running: 0, kvUsage: 0.1, activeAdapters: [], malformedLines: 0 },
      registry: Array.from({ length: n }, (_, i) => ({ name: `a${i}`, path: `/adapters/a${i}` })),
    };
  }
  async loadAdapter(): Promise<LoadOutcome> {
    return 'loaded';
  }
  async unloadAdapter(): Promise<UnloadOutcome> {
    return 'unloaded';
  }
}

function heapMb(): number {
  (global as { gc?: () => void }).gc?.();
  (global as { gc?: () => void }).gc?.();
  return process.memoryUsage().heapUsed / 1024 / 1024;
}

/**
 * Heap taken by the fleet state for `replicas` x `adapters` resident adapters, and what one
 * decision costs at that size (reading every replica's view, then the scheduling pipeline).
 */
export async function fleetAtScale(
  replicas: number,
  adapters: number,
  saturationMode: 'count' | 'predicted' = 'count',
): Promise<{ mb: number; perEntryBytes: number; usPerDecision: number }> {
  const bed = await decisionBed(replicas, adapters, saturationMode);
  // Timed once warm: the first decisions after building the store pay for compiling the code
  // and collecting the build's garbage (about 2.5x a steady decision), which a running node does not.
  const warm = 1000;
  for (let i = 0; i < warm; i++) await bed.decide(i);
  const n = 2000;
  const t0 = performance.now();
  for (let i = warm; i < warm + n; i++) await bed.decide(i);
  const usPerDecision = ((performance.now() - t0) * 1000) / n;
  return { mb: bed.mb, perEntryBytes: bed.perEntryBytes, usPerDecision };
}

/**
 * The fleet of `fleetAtScale` (every replica holding every adapter, fresh snapshots) and one
 * decision on it, the i-th adapter's: the store's views, then the scheduling pipeline (with
 * `predicted`, every replica with 16 requests of ours in flight). Shared with
 * bench/profile-decision.ts, which counts what a decision costs in instructions.
 */
export async function decisionBed(
  replicas: number,
  adapters: number,
  saturationMode: 'count' | 'predicted',
): Promise<{ mb: number; perEntryBytes: number; decide: (i: number) => Promise<Decision | null> }> {
  // Heap and typed-array memory alike (the store keeps timestamps in typed arrays).
  const memoryMb = () => heapMb() + process.memoryUsage().arrayBuffers / 1024 / 1024;
  // A real clock's milliseconds: not small integers, which V8 stores more cheaply than doubles.
  const at = 1_700_000_000_000;
  const before = memoryMb();
  const store = new MemoryFleetStore();
  const registry = Array.from({ length: adapters }, (_, i) => ({
    name: `adapter-${i}`,
    path: `/adapters/adapter-${i}`,
  }));
  const urls: string[] = [];
  for (let r = 0; r < replicas; r++) {
    const url = `http://10.0.${r >> 8}.${r & 255}:8000`;
    urls.push(url);
    await store.upsertReplica({ url, backend: 'vllm', priority: 0 });
    await store.applySnapshot(url, { at, ok: true, registry });
  }
  const after = memoryMb();
  const predicted = saturationMode === 'predicted';
  const pipeline = new SchedulingPipeline(
    pipelineFor({
      room_wait: 'escalate',
      scorer_weights: defaultWeights(),
      picker: 'p2c',
      saturation_mode: saturationMode,
    }),
  );
  const ctx: SchedulingContext = {
    now: at + 1,
    random: seededRandom(1),
    policy: {
      saturation: { targetWaitingPerReplica: 2, kvCeiling: 0.8 },
      maxLoadedAdapters: 8,
      staleAfterMs: 2000,
      saturationMode,
      saturationMarginMs: 250,
      ttftToleranceMs: 100,
    },
  };
  // Predicted: every replica with 16 requests of ours in flight and a known KV capacity, so
  // each prediction walks the work model as under load (the KV wait sorts the in-flight ones).
  const work = new WorkModel({ prefillTokensPerS: 10_000 });
  const loads = new LoadTimes(1000, 100);
  if (predicted)
    urls.forEach((url, r) => {
      work.setKvCapacity(url, 65_536);
      for (let k = 0; k < 16; k++)
        work.admit({ id: `${r}-${k}`, url, promptTokens: 3000 + 100 * k, maxTokens: 300, at });
    });
  // As src/router/prediction.ts: one prediction filled per candidate.
  const out = scratchPrediction();
  const decide = async (i: number) => {
    const adapter = { name: `adapter-${i % adapters}` };
    if (predicted) {
      const req = {
        promptTokens: 8000,
        maxTokens: 300,
        adapter: adapter.name,
        maxLoadedAdapters: 8,
        queueTimeoutMs: 29_000,
      };
      ctx.predict = (c) => {
        const p = predictTtft(c, req, ctx.now, work, loads, undefined, out);
        c.ttftMs = p.totalMs;
        c.loadMs = p.loadMs;
      };
    }
    return pipeline.schedule({ kind: 'on-demand', adapter }, await store.views(urls, adapter), ctx);
  };
  return {
    mb: after - before,
    perEntryBytes: ((after - before) * 1024 * 1024) / (replicas * adapters),
    decide,
  };
}

/**
 * In-process route + release on 8 replicas holding 16 adapters (resident, fresh): the i-th
 * request names the (i mod 16)-th adapter. Shared with bench/profile-decision.ts. Its prompts are
 * short unless `promptChars` pads them: from 256 characters on a prompt's blocks are renewed in
 * the prefix index (src/scheduler/prefix-index.ts) every request.
 */
export async function routeBed(
  config: Record<string, unknown> = {},
  promptChars = 0,
): Promise<{
  routeRelease: (i: number) => Promise<string>;
  stop: () => void;
}> {
  const rt = new FleetRuntime({
    api: new StaticApi(16),
    log: silentLogger,
    seed: 1,
    poller: { intervalMs: 60_000 },
  });
  const svc = new RouterService(
    parseRouterConfig({
      replicas: Array.from({ length: 8 }, (_, i) => ({ url: `http://10.1.0.${i}:8000` })),
      base_model: 'base',
      adapter_path_template: '/adapters/{name}',
      max_loaded_adapters: 16,
      ...config,
    }),
    rt,
  );
  await rt.poller.pollAll();
  const bodies = Array.from({ length: 16 }, (_, i) =>
    Buffer.from(
      `{"model":"a${i}","messages":[{"role":"user","content":"${`hello ${i}`.padEnd(promptChars, '.')}"}]}`,
    ),
  );
  const routeRelease = async (i: number) => {
    const r = await svc.route({ path: '/v1/chat/completions', body: bodies[i % 16]! });
    if (r.kind !== 'proxy') throw new Error(`decision ${i}: ${JSON.stringify(r.body)}`);
    await svc.finish(r.leaseId, 200);
    return r.url;
  };
  return { routeRelease, stop: () => rt.stop() };
}

/** The prompt length of `decisionHeap`'s requests: four of the prefix index's 256-character blocks. */
export const HEAP_PROMPT_CHARS = 1024;

/**
 * Heap after N routing decisions (resident adapters, in-process, no network): leaks show as
 * growth. Prompts of `HEAP_PROMPT_CHARS`, so that every request renews its blocks in the prefix
 * index: with short prompts this missed the Lru's held iterator, which kept about 290 bytes a
 * request (test/core/lru.test.ts).
 */
export async function decisionHeap(
  checkpoints: number[],
  log: (s: string) => void,
): Promise<{ decisions: number; heapMb: number; usPerDecision: number }[]> {
  const bed = await routeBed({}, HEAP_PROMPT_CHARS);
  const out: { decisions: number; heapMb: number; usPerDecision: number }[] = [];
  let done = 0;
  for (const target of checkpoints) {
    const t0 = performance.now();
    const start = done;
    for (; done < target; done++) await bed.routeRelease(done);
    const us = ((performance.now() - t0) * 1000) / (done - start);
    const heap = heapMb();
    out.push({ decisions: done, heapMb: heap, usPerDecision: us });
    log(
      `  ${done.toLocaleString('en-US')} decisions: heap ${heap.toFixed(1)} MB, ${us.toFixed(1)} µs per decision`,
    );
  }
  bed.stop();
  return out;
}

/**
 * Redis round trips of one request for a resident adapter, in the access phase (route) and in
 * the log phase (finish): counted at the store's one door to Redis (`RedisFleetStore.run`, one
 * script call each), heartbeats (a timer) left out; the routing core in process, a real
 * redis-server on loopback, two replicas, the adapter resident on one. The first requests are
 * not counted.
 */
export async function redisRoundTrips(): Promise<{ access: number; log: number }> {
  const redis = await RedisServer.start();
  const config = redis.config('trips:', { timeout: 2000 });
  const rt = new FleetRuntime({
    api: new StaticApi(1, 'http://10.2.0.1:8000'),
    log: silentLogger,
    seed: 1,
    redis: config,
    poller: { intervalMs: 600_000 },
  });
  const door = RedisFleetStore.prototype as unknown as { run: (name: string, ...a: unknown[]) => unknown };
  const run = door.run;
  const calls: string[] = [];
  door.run = function (this: unknown, name: string, ...a: unknown[]) {
    if (name !== 'heartbeat') calls.push(name);
    return run.call(this, name, ...a);
  };
  try {
    const svc = new RouterService(
      parseRouterConfig({
        replicas: [{ url: 'http://10.2.0.1:8000' }, { url: 'http://10.2.0.2:8000' }],
        base_model: 'base',
        adapter_path_template: '/adapters/{name}',
        max_loaded_adapters: 4,
        stale_after_ms: 600_000,
        redis: config,
      }),
      rt,
    );
    await rt.poller.pollAll();
    const body = Buffer.from('{"model":"a0","messages":[{"role":"user","content":"hi"}]}');
    const request = async () => {
      const r = await svc.route({ path: '/v1/chat/completions', body });
      if (r.kind !== 'proxy') throw new Error(`round trips: ${JSON.stringify(r.body)}`);
      return r.leaseId;
    };
    for (let i = 0; i < 3; i++) await svc.finish(await request(), 200);
    calls.length = 0;
    const id = await request();
    const access = calls.length;
    await svc.finish(id, 200);
    return { access, log: calls.length - access };
  } finally {
    door.run = run;
    rt.stop();
    await redis.close();
  }
}

/**
 * The prefix scorer's cost per decision (score every candidate, then record the choice), with
 * its index full and evicting: 4 KB prompts from a pool larger than the index holds.
 */
export function prefixScorerCost(decisions = 200_000): { usPerDecision: number } {
  const scorer = prefixScorer();
  const candidates = Array.from({ length: 8 }, (_, i) => ({ url: `http://10.0.0.${i}:8000` }) as Candidate);
  const random = seededRandom(3);
  // 16 blocks a prompt, 8,192 distinct prompts: 131,072 block hashes against 65,536 kept.
  const prompts = Array.from({ length: 8192 }, (_, i) => `${i}:`.padEnd(4096, 'lorem ipsum '));
  const run = (n: number) => {
    for (let i = 0; i < n; i++) {
      const req = {
        kind: 'on-demand' as const,
        adapter: { name: `a${i % 64}` },
        prompt: prompts[Math.floor(random() * prompts.length)]!,
      };
      scorer.score(req, candidates, undefined as never);
      scorer.observe!(req, candidates[i % candidates.length]!, undefined as never);
    }
  };
  run(decisions / 4); // warm up: the index full, the code optimised
  const t0 = performance.now();
  run(decisions);
  return { usPerDecision: ((performance.now() - t0) * 1000) / decisions };
}
