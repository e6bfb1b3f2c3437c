/**
 * No process keeps a record of a replica it forgot (dst/process-audit.ts): at the end of a run with
 * configuration changes, past the time each departed replica is due forgotten, no live process's
 * current runtime names it but in the bounded records (dst/replica-records.ts). The schedules the
 * simulation found keeping one hold now, and the audit catches a forget that skips one map.
 */
import { Poller } from '../../src/fleet/poller';
import { LoadBackoff } from '../../src/adapters/backoff';
import { RECORDS_INVARIANT } from '../../dst/process-audit';
import { DEFAULT_OPTIONS, runSchedule } from '../../dst/run';
import { generate, type Schedule, type ScheduleOptions } from '../../dst/schedule';
import type { Violation } from '../../dst/invariants';

const CONFIG: ScheduleOptions = { ...DEFAULT_OPTIONS, configChanges: true };

/** Replays a kept schedule: every invariant must hold now. */
async function holds(seed: number, world: Schedule['world'], actions: Schedule['actions']): Promise<void> {
  expect((await runSchedule({ seed, world, actions })).violation).toBeUndefined();
}

/** The first seed of [from, to) with configuration changes that breaks an invariant, and what. */
async function firstBroken(from: number, to: number): Promise<{ seed: number; v: Violation } | undefined> {
  for (let seed = from; seed < to; seed++) {
    const s = generate(seed, CONFIG);
    if (!s.world.configChanges) continue;
    const r = await runSchedule(s);
    if (r.violation) return { seed, v: r.violation };
  }
  return undefined;
}

describe('schedules that kept a record of a replica forgotten', () => {
  // Seed 3120491 (--keep 7,8,45,47,50): replica-0 fails its next loads (`rank`, an adapter fault),
  // so node 0's load of `math` there failed and backed it off; every node then dropped replica-0.
  // Forgotten by the store and the process, its backoff entry stayed in the adapter's entries
  // (bounded by adapters, not by their replicas): `rt.manager.backoff.entries.vals[0].byUrl<key
  // http://replica-0:8000>`. Now LoadBackoff.forget drops it with the replica.
  it("seed 3120491: a failed load's backoff goes with the replica", async () => {
    await holds(
      3120491,
      {
        nodes: 3,
        replicas: 2,
        maxLoadedAdapters: 4,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math', 'law', 'med', 'fin'],
        loadMs: 200,
        decodeMsPerStep: 100,
        coldLoadsPerMinute: 3,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 1000,
        spanMs: 3660,
        queueTimeoutMs: 2000,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 2000,
        maxNumSeqs: 4,
        prefetch: { intervalMs: 500, halfLifeMs: 1000, loadsPerMinute: 1, hysteresis: 0, evictFactor: 2 },
        configChanges: { retainEveryMs: 10000, staleMs: 437 },
      },
      [
        { at: 408, kind: 'load-fail', replica: 0, count: 4, failure: 'rank' },
        { at: 426, kind: 'request', node: 0, adapter: 6, tokens: 2, prompt: 1065, onOldConfig: true },
        { at: 3397, kind: 'config-change', node: 2, replicas: [1] },
        { at: 3516, kind: 'config-change', node: 1, replicas: [1] },
        { at: 3754, kind: 'config-change', node: 0, replicas: [1] },
      ],
    );
  }, 60_000);

  // Seed 3120343 (--keep 6,7,8,18,20,22,25): node 0's word on replica-0 found `a` running with no
  // lease of its own (another node's request): an unseen hold of 2 s began. Holds past their time
  // are dropped only as a later hold begins; none did, and replica-0, forgotten, stayed in
  // `rt.manager.room.replicaWord.unseen<key http://replica-0:8000\0a>`. Now the adapter manager
  // drops the replica's pairs when it forgets it (and keeps it a round while a hold is live).
  it('seed 3120343: an unseen hold past its time goes with the replica', async () => {
    await holds(
      3120343,
      {
        nodes: 3,
        replicas: 2,
        maxLoadedAdapters: 4,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code'],
        loadMs: 800,
        decodeMsPerStep: 50,
        coldLoadsPerMinute: 6,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 1000,
        spanMs: 2000,
        staticAdapters: ['sql,chat'],
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 500,
        prefetch: { intervalMs: 2000, halfLifeMs: 3000, loadsPerMinute: 4, hysteresis: 0.5, evictFactor: 8 },
        configChanges: { retainEveryMs: 10000, staleMs: 1463 },
      },
      [
        { at: 481, kind: 'request', node: 1, adapter: 0, tokens: 3, prompt: 1454, sourceMs: 13 },
        {
          at: 497,
          kind: 'request',
          node: 2,
          adapter: 4,
          tokens: 4,
          prompt: 766,
          gaveUp: { afterMs: 227, unwritten: false, noticeMs: 495 },
          sourceMs: 240,
          onOldConfig: true,
        },
        { at: 518, kind: 'request', node: 0, adapter: 1, tokens: 2, prompt: 884, onOldConfig: true },
        { at: 1193, kind: 'request', node: 1, adapter: 2, tokens: 6, prompt: 500 },
        { at: 1477, kind: 'config-change', node: 1, replicas: [1] },
        { at: 1567, kind: 'config-change', node: 2, replicas: [1] },
        { at: 1692, kind: 'config-change', node: 0, replicas: [1] },
      ],
    );
  }, 60_000);

  // Seed 3120006 (--keep 5,6,7,8): node 1 loaded `math` on replica-2 (prefetch or the request) and
  // ended the lock; the ends a failover store keeps to send again (a server restored from an older
  // copy may hold the lock: src/fleet/redis/ended-locks.ts) were pruned past their TTL only at the
  // next lock's end. None came: `rt.store.endedLocks.ended[1].url` named replica-2 for good. Now
  // the forget waits for its ends' TTL (a round or a few) and drops those past it.
  it("seed 3120006: a lock's end kept to send again goes past its TTL with the replica", async () => {
    await holds(
      3120006,
      {
        nodes: 3,
        replicas: 3,
        maxLoadedAdapters: 2,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math'],
        loadMs: 800,
        decodeMsPerStep: 50,
        coldLoadsPerMinute: 6,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 0,
        spanMs: 2000,
        queueTimeoutMs: 4000,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 500,
        prefetch: { intervalMs: 500, halfLifeMs: 3000, loadsPerMinute: 4, hysteresis: 0, evictFactor: 8 },
        configChanges: { retainEveryMs: 3000, staleMs: 997 },
      },
      [
        { at: 678, kind: 'config-change', node: 0, replicas: [0] },
        { at: 793, kind: 'config-change', node: 2, replicas: [0] },
        { at: 854, kind: 'config-change', node: 1, replicas: [0] },
        {
          at: 906,
          kind: 'request',
          node: 1,
          adapter: 6,
          tokens: 6,
          prompt: 1657,
          gaveUp: { afterMs: 2011, unwritten: true, noticeMs: 14 },
          sourceMs: 173,
          onOldConfig: true,
        },
      ],
    );
  }, 60_000);
  // Seed 3126238 (--keep 4,7,8,12,18): every node drops replica-1 (0.5-0.7 s), a `redis` record
  // change on the same state replaces a runtime (its successor starts with no list read), and the
  // state is emptied at 1.8 s. A node forgot in-process only a replica gone from the store's list
  // since its round before; replica-1 left it while still claimed (kept then) and was never listed
  // again: its poller's readings, work model, seen-down dates, ... stayed for good ("n0g0 keeps
  // http://replica-1:8000 ...: rt.store.seenDown.dated<key ...>; ...; rt.poller.lastLoad<key ...>").
  // Now every replica listed or claimed once is looked at each round until dropped.
  it('seed 3126238: a replica that left the list while still claimed is dropped once it is neither', async () => {
    await holds(
      3126238,
      {
        nodes: 3,
        replicas: 2,
        maxLoadedAdapters: 1,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math', 'law', 'med', 'fin', 'bio', 'geo'],
        loadMs: 800,
        decodeMsPerStep: 50,
        coldLoadsPerMinute: 1000,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 1000,
        spanMs: 2000,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 2000,
        sloClasses: [
          { name: 'interactive', ttft_ms: 1000, priority: 0 },
          { name: 'batch', ttft_ms: 2500, priority: -1 },
        ],
        prefetch: { intervalMs: 1000, halfLifeMs: 1000, loadsPerMinute: 1, hysteresis: 1, evictFactor: 1 },
        configChanges: { retainEveryMs: 3000, staleMs: 1071 },
      },
      [
        { at: 508, kind: 'config-change', node: 1, replicas: [0] },
        { at: 631, kind: 'config-change', node: 0, replicas: [0] },
        { at: 686, kind: 'record-change', otherState: false, gapMs: 47 },
        { at: 719, kind: 'config-change', node: 2, replicas: [0] },
        { at: 1793, kind: 'flushall' },
      ],
    );
  }, 60_000);

  // Seed 3123801 (25 actions kept): node 1's prefetch demand for `team` (half-life 10 s, 19 requests'
  // worth) named the replicas of the configuration that saw it, replica-0 among them; it decays
  // below the floor only after about 86 s, so past replica-0's forget it was still there
  // (`rt.prefetcher.demand.entries[team].urls[0]`). Now the forget takes the replica out of every
  // adapter's demand.
  it('seed 3123801: the prefetch demand no longer names a replica forgotten', async () => {
    await holds(
      3123801,
      {
        nodes: 3,
        replicas: 2,
        maxLoadedAdapters: 2,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math', 'law', 'med', 'fin'],
        loadMs: 200,
        decodeMsPerStep: 50,
        coldLoadsPerMinute: 3,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 1000,
        spanMs: 8107,
        staticAdapters: ['sql,chat'],
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 500,
        queueTimeoutMs: 2554,
        maxNumSeqs: 4,
        sloClasses: [
          { name: 'interactive', ttft_ms: 1000, priority: 0 },
          { name: 'batch', ttft_ms: 45039, priority: -1 },
        ],
        prefetch: { intervalMs: 2000, halfLifeMs: 10000, loadsPerMinute: 4, hysteresis: 0.5, evictFactor: 2 },
        configChanges: { retainEveryMs: 1000, staleMs: 2791 },
      },
      [
        { at: 3324, kind: 'request', node: 1, adapter: 2, tokens: 49, prompt: 1013, cls: 'interactive' },
        { at: 3454, kind: 'request', node: 1, adapter: -1, tokens: 41, prompt: 1770 },
        { at: 3474, kind: 'request', node: 1, adapter: 1, tokens: 58, prompt: 1696, cls: 'interactive' },
        {
          at: 3695,
          kind: 'request',
          node: 1,
          adapter: 9,
          tokens: 26,
          prompt: 1060,
          cls: 'interactive',
          onOldConfig: true,
        },
        { at: 3867, kind: 'request', node: 1, adapter: 3, tokens: 28, prompt: 1405, onOldConfig: true },
        {
          at: 3879,
          kind: 'request',
          node: 1,
          adapter: 2,
          tokens: 27,
          prompt: 1881,
          cls: 'interactive',
          onOldConfig: true,
        },
        { at: 3919, kind: 'request', node: 1, adapter: -1, tokens: 6, prompt: 38, cls: 'batch' },
        { at: 4386, kind: 'request', node: 1, adapter: 3, tokens: 21, prompt: 1407, onOldConfig: true },
        { at: 4449, kind: 'request', node: 1, adapter: 3, tokens: 36, prompt: 1075, onOldConfig: true },
        { at: 4516, kind: 'request', node: 1, adapter: 3, tokens: 46, prompt: 1568, onOldConfig: true },
        {
          at: 4534,
          kind: 'request',
          node: 1,
          adapter: -1,
          tokens: 1,
          prompt: 81,
          cls: 'batch',
          onOldConfig: true,
        },
        { at: 4672, kind: 'request', node: 1, adapter: 3, tokens: 41, prompt: 1904 },
        {
          at: 4896,
          kind: 'request',
          node: 1,
          adapter: 3,
          tokens: 56,
          prompt: 1121,
          cls: 'interactive',
          onOldConfig: true,
        },
        { at: 5016, kind: 'request', node: 1, adapter: -1, tokens: 3, prompt: 113, cls: 'batch' },
        {
          at: 5301,
          kind: 'request',
          node: 1,
          adapter: 8,
          tokens: 31,
          prompt: 1404,
          cls: 'interactive',
          onOldConfig: true,
        },
        { at: 5354, kind: 'config-change', node: 2, replicas: [1] },
        { at: 5368, kind: 'config-change', node: 0, replicas: [1] },
        { at: 5528, kind: 'request', node: 1, adapter: -1, tokens: 33, prompt: 1625, cls: 'interactive' },
        { at: 5561, kind: 'config-change', node: 1, replicas: [1] },
        { at: 5692, kind: 'request', node: 1, adapter: 5, tokens: 56, prompt: 1820, cls: 'interactive' },
        {
          at: 5886,
          kind: 'request',
          node: 1,
          adapter: 5,
          tokens: 35,
          prompt: 1250,
          cls: 'interactive',
          onOldConfig: true,
        },
        {
          at: 6126,
          kind: 'request',
          node: 1,
          adapter: 3,
          tokens: 23,
          prompt: 1133,
          cls: 'interactive',
          onOldConfig: true,
        },
        { at: 6320, kind: 'request', node: 1, adapter: 5, tokens: 32, prompt: 1987, cls: 'interactive' },
        { at: 6579, kind: 'request', node: 1, adapter: 4, tokens: 21, prompt: 1954, cls: 'interactive' },
        {
          at: 6830,
          kind: 'request',
          node: 1,
          adapter: 3,
          tokens: 58,
          prompt: 1492,
          cls: 'interactive',
          onOldConfig: true,
        },
      ],
    );
  }, 60_000);
});

describe('the audit catches a forget that skips one record', () => {
  const saved = { forget: Poller.prototype.forget, backoff: LoadBackoff.prototype.forget };
  afterEach(() => {
    Poller.prototype.forget = saved.forget;
    LoadBackoff.prototype.forget = saved.backoff;
  });

  it("planted: the poller's forget keeps the replica's context length (maxModelLen)", async () => {
    Poller.prototype.forget = function (this: Poller, url: string) {
      const len = this.maxModelLen.get(url);
      const done = saved.forget.call(this, url);
      if (len !== undefined) this.maxModelLen.set(url, len);
      return done;
    };
    const found = await firstBroken(1, 300);
    expect(found?.v.invariant).toBe(RECORDS_INVARIANT);
    expect(found?.v.detail).toMatch(/keeps .*rt\.poller\.maxModelLen<key/);
  }, 120_000);

  it("planted: the adapter manager's forget keeps the failed loads' backoff", async () => {
    LoadBackoff.prototype.forget = () => undefined;
    const found = await firstBroken(1, 600);
    expect(found?.v.invariant).toBe(RECORDS_INVARIANT);
    expect(found?.v.detail).toMatch(/keeps .*backoff\.entries/);
  }, 240_000);
});
