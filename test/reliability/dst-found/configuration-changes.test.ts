/**
 * Kept schedules (./holds.ts) with configuration changes: a node's configuration listing other
 * replicas, stale workers on the previous one, departed replicas the store forgot.
 */
import { runSchedule } from '../../../dst/run';
import type { Schedule } from '../../../dst/schedule';
import { health } from '../../../src/scheduler/filters/health';
import { holds } from './holds';

/** Seed 2859841's world (with configuration changes). */
const WORLD_2859841: Schedule['world'] = {
  nodes: 3,
  replicas: 2,
  maxLoadedAdapters: 2,
  adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math', 'law', 'med', 'fin', 'bio', 'geo'],
  loadMs: 200,
  decodeMsPerStep: 50,
  coldLoadsPerMinute: 1000,
  leaseMaxAgeMs: 4000,
  ttftSloMs: 1000,
  spanMs: 4297,
  upstreamTimeoutMs: 5000,
  nodeTtlMs: 500,
  configChanges: { retainEveryMs: 3000, staleMs: 694 },
};

/** Its kept schedule: replica-0 answering 500, node 0's configuration changed to list `listed`, then its request. */
const outage2859841 = (listed: number[]): Schedule['actions'] => [
  { at: 826, kind: 'request', node: 2, adapter: 7, tokens: 1, prompt: 1198, onOldConfig: true },
  { at: 949, kind: 'request', node: 2, adapter: 9, tokens: 2, prompt: 1519, onOldConfig: true },
  { at: 1077, kind: 'replica-outage', replica: 0, ms: 3362, mode: 'error500' },
  { at: 3002, kind: 'config-change', node: 0, replicas: listed },
  { at: 3570, kind: 'request', node: 0, adapter: 9, tokens: 6, prompt: 1239 },
];

describe('schedules with configuration changes', () => {
  // Seed 2740782 with configuration changes (--keep 25,43,44,53; found by the sweep of
  // 2,740,000-2,744,999 on branch dst-config): node 2's configuration changes to list replica-1
  // only, which is restarting; Kong's 502 there marks it down, and the next request goes there
  // anyway, as the health filter fails open among the replicas of the configuration that routes it
  // (replica-1 is its only one). The kong-mark check counted the world's other replicas, up, as
  // somewhere else to go: it now counts those the routing configuration lists (a gap in the check).
  it('seed 2740782: the health filter fails open among the replicas its configuration lists', async () => {
    await holds(
      2740782,
      {
        nodes: 3,
        replicas: 3,
        maxLoadedAdapters: 2,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code'],
        loadMs: 1500,
        decodeMsPerStep: 100,
        coldLoadsPerMinute: 1000,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 1000,
        spanMs: 5783,
        staticAdapters: ['sql,chat'],
        queueTimeoutMs: 2000,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 500,
        maxNumSeqs: 4,
        prefetch: { intervalMs: 2000, halfLifeMs: 3000, loadsPerMinute: 1, hysteresis: 0, evictFactor: 1 },
        configChanges: { retainEveryMs: 3000, staleMs: 1345 },
      },
      [
        { at: 1829, kind: 'replica-restart', replica: 1, downMs: 1923 },
        { at: 3193, kind: 'config-change', node: 2, replicas: [1] },
        { at: 3218, kind: 'request', node: 2, adapter: -1, tokens: 54, prompt: 1141 },
        { at: 3861, kind: 'request', node: 2, adapter: -1, tokens: 23, prompt: 1598 },
      ],
    );
  }, 60_000);
  // Seed 2859841 with configuration changes (--keep 14,15,19,27,28; found by the lead's sweep of
  // main): replica-0 answers 500 from 1,077 ms for 3,362 ms and node 0's configuration changes at
  // 3,002 ms to list replica-0 only; its request at 3,570 ms goes there, as the health filter fails
  // open among the replicas of the configuration that routes it. "A replica seen down gets no
  // request" counted the world's other replica, up, as somewhere else to go: it now counts those the
  // routing configuration lists, as the kong-mark check does (seed 2740782; a gap in the check).
  it('seed 2859841: a node whose configuration lists only the replica down routes there', async () => {
    await holds(2859841, WORLD_2859841, outage2859841([0]));
  }, 60_000);
  // The check still holds a router to its health filter among the replicas its configuration
  // lists: node 0's configuration listing both, replica-1 up, its request avoids replica-0; a
  // planted filter that keeps every candidate sends it there and is caught.
  it('seed 2859841 listing both replicas: the request avoids the one down, and a filter that keeps it is caught', async () => {
    await holds(2859841, WORLD_2859841, outage2859841([0, 1]));
    const filter = health.filter;
    health.filter = (_req, candidates) => ({ kept: candidates });
    try {
      const r = await runSchedule({ seed: 2859841, world: WORLD_2859841, actions: outage2859841([0, 1]) });
      expect(r.violation?.invariant).toBe('a replica seen down gets no request');
    } finally {
      health.filter = filter;
    }
  }, 60_000);
  // Seed 2855225 with configuration changes (--keep 5,6,7,16,20,21,22,27,29,30; found by the lead's
  // sweep of main): node 2's configuration lists replica-1 only from 1,795 ms; its request for `code`
  // at 3,019 ms is routed by a worker still on the previous configuration (both replicas), the one at
  // 3,434 ms by the new one. Both decide at 6,825 ms, past the partition: the first loads `code` on
  // replica-0, the second cannot join it there (its configuration does not list replica-0) and loads
  // it on replica-1. "Each cold adapter loaded once per burst" now excuses a second load whose
  // routing configuration does not list the replica of the first (a gap in the check).
  it('seed 2855225: a request cannot join a load on a replica its configuration does not list', async () => {
    await holds(
      2855225,
      {
        nodes: 3,
        replicas: 2,
        maxLoadedAdapters: 2,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math', 'law', 'med', 'fin'],
        loadMs: 200,
        decodeMsPerStep: 50,
        coldLoadsPerMinute: 1000,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 1000,
        spanMs: 3805,
        staticAdapters: ['sql,chat'],
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 500,
        prefetch: { intervalMs: 2000, halfLifeMs: 3000, loadsPerMinute: 4, hysteresis: 0.5, evictFactor: 1 },
        configChanges: { retainEveryMs: 3000, staleMs: 2053 },
      },
      [
        { at: 301, kind: 'request', node: 1, adapter: 0, tokens: 4, prompt: 376, onOldConfig: true },
        { at: 302, kind: 'request', node: 1, adapter: 4, tokens: 5, prompt: 623, onOldConfig: true },
        { at: 304, kind: 'request', node: 1, adapter: 2, tokens: 3, prompt: 99, onOldConfig: true },
        { at: 1388, kind: 'partition', node: 2, ms: 2229 },
        { at: 1676, kind: 'request', node: 1, adapter: 7, tokens: 1, prompt: 1332 },
        { at: 1699, kind: 'request', node: 0, adapter: 7, tokens: 5, prompt: 1380 },
        { at: 1795, kind: 'config-change', node: 2, replicas: [1] },
        { at: 3019, kind: 'request', node: 2, adapter: 5, tokens: 4, prompt: 1342, onOldConfig: true },
        { at: 3284, kind: 'config-change', node: 2, replicas: [1] },
        { at: 3434, kind: 'request', node: 2, adapter: 5, tokens: 2, prompt: 1860, onOldConfig: true },
      ],
    );
  }, 60_000);
  // Seed 2883001 with configuration changes (--keep 0,1,3,4,5,6,7,8,9,10,11,12,13,14,15,17,19,20;
  // found by the lead's sweep of main): request 3 for `fin`, routed by a worker on node 0's previous
  // configuration (both replicas), won the placement on replica-1 at 5,254 ms and waits for room
  // there (others' loads take the slots it frees); request 10, routed by the new configuration
  // (replica-0 only), cannot follow that placement and loads `fin` on replica-0 at 6,106 ms; request
  // 3's room comes and it loads on replica-1 at 6,333 ms. The later placed is judged, not the later
  // begun load: it could not join a replica its configuration does not list (a gap in the check).
  it('seed 2883001: a request placed first loads after one that could not follow its placement', async () => {
    await holds(
      2883001,
      {
        nodes: 3,
        replicas: 2,
        maxLoadedAdapters: 1,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math', 'law', 'med', 'fin'],
        loadMs: 800,
        decodeMsPerStep: 50,
        coldLoadsPerMinute: 1000,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 1000,
        spanMs: 2000,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 500,
        sloClasses: [
          { name: 'interactive', ttft_ms: 1000, priority: 0 },
          { name: 'batch', ttft_ms: 2500, priority: -1 },
        ],
        configChanges: { retainEveryMs: 10_000, staleMs: 246 },
      },
      [
        { at: 12, kind: 'request', node: 2, adapter: 6, tokens: 1, prompt: 525, cls: 'interactive' },
        { at: 37, kind: 'request', node: 2, adapter: 5, tokens: 1, prompt: 722, cls: 'batch' },
        {
          at: 371,
          kind: 'request',
          node: 0,
          adapter: 9,
          tokens: 1,
          prompt: 1799,
          cls: 'batch',
          onOldConfig: true,
        },
        { at: 603, kind: 'record-change', otherState: false, gapMs: 342 },
        { at: 734, kind: 'redis-restart', empty: false, downMs: 883 },
        { at: 854, kind: 'request', node: 1, adapter: 1, tokens: 4, prompt: 923, cls: 'interactive' },
        { at: 972, kind: 'slow-path', node: 2, replica: 1, ms: 243, hopMs: 2867 },
        { at: 991, kind: 'request', node: 1, adapter: 7, tokens: 3, prompt: 1708, cls: 'interactive' },
        {
          at: 1025,
          kind: 'request',
          node: 2,
          adapter: 0,
          tokens: 6,
          prompt: 1312,
          cls: 'interactive',
          onOldConfig: true,
        },
        { at: 1086, kind: 'redis-restart', empty: false, downMs: 319 },
        { at: 1103, kind: 'config-change', node: 2, replicas: [0] },
        {
          at: 1110,
          kind: 'request',
          node: 0,
          adapter: 5,
          tokens: 4,
          prompt: 832,
          cls: 'batch',
          onOldConfig: true,
        },
        { at: 1186, kind: 'config-change', node: 0, replicas: [0] },
        { at: 1369, kind: 'config-change', node: 1, replicas: [0] },
        {
          at: 1605,
          kind: 'request',
          node: 0,
          adapter: 3,
          tokens: 2,
          prompt: 939,
          cls: 'batch',
          onOldConfig: true,
        },
        {
          at: 1734,
          kind: 'request',
          node: 1,
          adapter: 5,
          tokens: 5,
          prompt: 1282,
          cls: 'interactive',
          onOldConfig: true,
        },
        {
          at: 1977,
          kind: 'request',
          node: 0,
          adapter: 9,
          tokens: 3,
          prompt: 481,
          cls: 'interactive',
          onOldConfig: true,
        },
        { at: 65_116, kind: 'config-change', node: 0, replicas: [0, 1] },
      ],
    );
  }, 60_000);
  // Seed 2892202 with configuration changes (--keep 18,19,26,27,30,38,42,43,44,45,48,49,56,57,59,61,62,65;
  // found by the lead's sweep of main): every node's configuration lists replica-0 and replica-1 only
  // from about 5.3 s; the store forgets replica-2 at 75,877 ms. Node 2's prefetcher still held the
  // demand for `chat` its requests through the previous configuration (all three replicas) had left,
  // decaying (half-life 10 s) but above its floor, and its tick at 76,777 ms asked the store for the
  // views of those three: two came back, which its failover store reads as a state emptied, so it
  // registered its local copy's replicas again, replica-2 with them. Every node polled (and
  // preflight-checked) replica-2 again until the store forgot it once more: called at 83,929 ms, due
  // 82,175 ms. A prefetch tick now asks only of the replicas this node routes to (a router bug).
  it('seed 2892202: a prefetch tick on demand seen through a lapsed configuration registers no departed replica again', async () => {
    await holds(
      2892202,
      {
        nodes: 3,
        replicas: 3,
        maxLoadedAdapters: 2,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code'],
        loadMs: 800,
        decodeMsPerStep: 100,
        coldLoadsPerMinute: 1000,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 1000,
        spanMs: 5711,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 2000,
        queueTimeoutMs: 2000,
        maxNumSeqs: 4,
        prefetch: { intervalMs: 1000, halfLifeMs: 10_000, loadsPerMinute: 4, hysteresis: 0, evictFactor: 1 },
        configChanges: { retainEveryMs: 3000, staleMs: 1178 },
      },
      [
        {
          at: 1544,
          kind: 'request',
          node: 2,
          adapter: 1,
          tokens: 31,
          prompt: 1333,
          gaveUp: { afterMs: 149, unwritten: false, noticeMs: 69 },
          sourceMs: 28,
        },
        { at: 1764, kind: 'request', node: 2, adapter: -1, tokens: 2, prompt: 1296 },
        {
          at: 2708,
          kind: 'request',
          node: 2,
          adapter: 1,
          tokens: 36,
          prompt: 1767,
          sourceMs: 7,
          onOldConfig: true,
        },
        { at: 2858, kind: 'request', node: 2, adapter: 5, tokens: 26, prompt: 1792, sourceMs: 112 },
        { at: 2893, kind: 'slow-path', node: 0, replica: 2, ms: 3003, hopMs: 2798 },
        {
          at: 3227,
          kind: 'request',
          node: 2,
          adapter: 1,
          tokens: 40,
          prompt: 1385,
          sourceMs: 142,
          onOldConfig: true,
        },
        {
          at: 3541,
          kind: 'request',
          node: 2,
          adapter: 1,
          tokens: 34,
          prompt: 1172,
          sourceMs: 3,
          onOldConfig: true,
        },
        { at: 3599, kind: 'request', node: 2, adapter: 5, tokens: 28, prompt: 1742 },
        { at: 4241, kind: 'request', node: 2, adapter: 1, tokens: 28, prompt: 1722, onOldConfig: true },
        {
          at: 4332,
          kind: 'request',
          node: 2,
          adapter: -1,
          tokens: 49,
          prompt: 1958,
          sourceMs: 265,
          onOldConfig: true,
        },
        {
          at: 4695,
          kind: 'request',
          node: 2,
          adapter: 1,
          tokens: 43,
          prompt: 1072,
          sourceMs: 150,
          onOldConfig: true,
        },
        {
          at: 4748,
          kind: 'request',
          node: 2,
          adapter: 5,
          tokens: 23,
          prompt: 1678,
          gaveUp: { afterMs: 290, unwritten: true, noticeMs: 7 },
          sourceMs: 50,
        },
        { at: 5158, kind: 'request', node: 2, adapter: 2, tokens: 5, prompt: 862, onOldConfig: true },
        {
          at: 5167,
          kind: 'request',
          node: 2,
          adapter: 1,
          tokens: 54,
          prompt: 1512,
          sourceMs: 137,
          onOldConfig: true,
        },
        { at: 5262, kind: 'config-change', node: 0, replicas: [0, 1] },
        { at: 5286, kind: 'config-change', node: 1, replicas: [0, 1] },
        { at: 5339, kind: 'request', node: 2, adapter: 1, tokens: 6, prompt: 673, sourceMs: 58 },
        { at: 5392, kind: 'config-change', node: 2, replicas: [0, 1] },
      ],
    );
  }, 120_000);
  // Seed 2901338 with configuration changes (--keep 2,3,4,5,6,7,12,14,15; found by the lead's sweep
  // of main): node 2's requests for `bio` leave demand on all three replicas; every configuration
  // lists replica-1 only from 1,897 ms. The store forgets replica-0 and replica-2 at 68,249 ms; node 2's
  // prefetch tick asks of all three at once, reads the one view back as a state emptied and registers
  // its local copy's replicas again (68,285 ms): polled by every node until forgotten again at
  // 75,102 ms, called at 75,965 ms (due 75,336 ms). The same router bug as seed 2892202.
  it('seed 2901338: a prefetch tick on demand seen through a lapsed configuration registers no departed replica again', async () => {
    await holds(
      2901338,
      {
        nodes: 3,
        replicas: 3,
        maxLoadedAdapters: 1,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math', 'law', 'med', 'fin', 'bio', 'geo'],
        loadMs: 800,
        decodeMsPerStep: 50,
        coldLoadsPerMinute: 6,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 0,
        spanMs: 2000,
        queueTimeoutMs: 4000,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 500,
        sloClasses: [
          { name: 'interactive', ttft_ms: 1000, priority: 0 },
          { name: 'batch', ttft_ms: 2500, priority: -1, max_in_flight: 1 },
        ],
        prefetch: { intervalMs: 500, halfLifeMs: 10_000, loadsPerMinute: 4, hysteresis: 0, evictFactor: 2 },
        configChanges: { retainEveryMs: 3000, staleMs: 645 },
      },
      [
        { at: 1040, kind: 'request', node: 2, adapter: 10, tokens: 13, prompt: 194, cls: 'batch' },
        { at: 1082, kind: 'request', node: 2, adapter: 10, tokens: 22, prompt: 216, cls: 'batch' },
        {
          at: 1202,
          kind: 'request',
          node: 2,
          adapter: 10,
          tokens: 22,
          prompt: 299,
          cls: 'batch',
          onOldConfig: true,
        },
        { at: 1203, kind: 'request', node: 2, adapter: 10, tokens: 13, prompt: 47, cls: 'batch' },
        {
          at: 1210,
          kind: 'request',
          node: 2,
          adapter: 10,
          tokens: 13,
          prompt: 53,
          cls: 'batch',
          onOldConfig: true,
        },
        {
          at: 1228,
          kind: 'request',
          node: 2,
          adapter: 10,
          tokens: 27,
          prompt: 129,
          cls: 'batch',
          onOldConfig: true,
        },
        { at: 1639, kind: 'config-change', node: 0, replicas: [1] },
        { at: 1813, kind: 'config-change', node: 1, replicas: [1] },
        { at: 1897, kind: 'config-change', node: 2, replicas: [1] },
      ],
    );
  }, 120_000);

  // Seed 3455548 (--keep 26,33,40,44; the lead's sweep of 1fc0402f): node 1 moves to db 1 and replica 2
  // at 2,901 ms; nodes 2 and 0 list only replica 0 from 4,411 and 4,799 ms; node 1 moves back to db 0
  // and replica 0 at 74,384 ms. Its new db 0 runtime polled replica 1 (still listed there) into its
  // work model at 75,367 ms; at 75,437 ms its lora-poller's record (timeout only) followed and replaced
  // it on the same state, the successor sharing that work model (one node). The store forgot replica 1
  // then: the successor's first list never named it, so its rounds never looked at it, and the
  // replaced runtime's stopped. The work model kept replica 1 for good (no process keeps a record of
  // a replica it forgot). A round now also looks at every replica its work model names.
  it('seed 3455548: a work model shared with a runtime replaced on the same state forgets what that runtime polled', async () => {
    await holds(
      3455548,
      {
        nodes: 3,
        replicas: 3,
        maxLoadedAdapters: 1,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math', 'law', 'med', 'fin', 'bio', 'geo'],
        loadMs: 1500,
        decodeMsPerStep: 50,
        coldLoadsPerMinute: 6,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 0,
        spanMs: 5178,
        queueTimeoutMs: 4000,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 500,
        configChanges: {
          retainEveryMs: 10000,
          staleMs: 1416,
          poller: { lagMs: 1053, timeout: 1 },
          move: { away: [2] },
        },
      },
      [
        { at: 2901, kind: 'move', node: 1, replicas: [2] },
        { at: 4411, kind: 'config-change', node: 2, replicas: [0] },
        { at: 4799, kind: 'config-change', node: 0, replicas: [0] },
        { at: 74384, kind: 'move', node: 1, replicas: [0] },
      ],
    );
  }, 120_000);
});
