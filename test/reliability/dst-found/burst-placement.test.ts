/**
 * Kept schedules (./holds.ts) for "each cold adapter loaded once per burst" (docs/reliability.md)
 * through placements: claims given back, re-checked after a wait for room, copies spread past a
 * saturated placement.
 */
import { runSchedule } from '../../../dst/run';
import { WORLD, WORLD_2300, holds } from './holds';

describe('schedules the simulation found', () => {
  // Seed 2300 (--keep 0,1,2,3,4,5,6,8,9,10,11,15,16,17,18,19,20,21,22,23,24,25; no fault): vLLM
  // runs its loads one by one, so node 2's load of `sql` on replica-0 (sent at 895 ms, third in
  // line) times out at 3,895 ms. Node 1's request, waiting for that load, claims replica-0 again
  // (the placement still stood there) and loads `sql` there; node 2's failed request then gives
  // its claim back, which dropped the placement node 1's load was under. Node 2's next request
  // for `sql` (4,700 ms) predicts the loading replica-0 slower than a copy and, no placement to
  // follow, loads `sql` on replica-1 while node 1's load runs. A placement now goes once every
  // request that claimed it gave it back (`claimPlacement`'s claimer).
  it("seed 2300: a failed request's claim given back leaves another's placement on that replica", async () => {
    await holds(2300, WORLD_2300, [
      { at: 377, kind: 'request', node: 1, adapter: 6, tokens: 2, prompt: 1402 },
      { at: 440, kind: 'request', node: 2, adapter: 1, tokens: 1, prompt: 110 },
      { at: 502, kind: 'request', node: 0, adapter: 6, tokens: 4, prompt: 1299 },
      { at: 631, kind: 'request', node: 2, adapter: 2, tokens: 92, prompt: 1816 },
      { at: 700, kind: 'request', node: 1, adapter: 5, tokens: 6, prompt: 1195 },
      { at: 882, kind: 'request', node: 2, adapter: 0, tokens: 1, prompt: 1654 },
      { at: 884, kind: 'request', node: 1, adapter: 0, tokens: 5, prompt: 713 },
      { at: 954, kind: 'request', node: 2, adapter: 1, tokens: 1, prompt: 1012 },
      { at: 1113, kind: 'request', node: 1, adapter: 6, tokens: 2, prompt: 570 },
      { at: 1281, kind: 'request', node: 0, adapter: 7, tokens: 3, prompt: 1576 },
      { at: 1301, kind: 'request', node: 1, adapter: 6, tokens: 4, prompt: 342 },
      { at: 1958, kind: 'request', node: 2, adapter: 6, tokens: 6, prompt: 484 },
      { at: 1971, kind: 'request', node: 0, adapter: 1, tokens: 6, prompt: 1032 },
      { at: 4548, kind: 'request', node: 0, adapter: 2, tokens: 1, prompt: 986 },
      { at: 4581, kind: 'request', node: 1, adapter: 0, tokens: 2, prompt: 926 },
      { at: 4700, kind: 'request', node: 2, adapter: 0, tokens: 3, prompt: 1835 },
      { at: 4916, kind: 'request', node: 1, adapter: 0, tokens: 2, prompt: 1605 },
      { at: 4996, kind: 'request', node: 2, adapter: 6, tokens: 6, prompt: 986 },
      { at: 5176, kind: 'request', node: 1, adapter: 5, tokens: 1, prompt: 757 },
      { at: 5657, kind: 'request', node: 0, adapter: 4, tokens: 5, prompt: 417 },
      { at: 5728, kind: 'request', node: 0, adapter: 4, tokens: 1, prompt: 227 },
      { at: 5944, kind: 'request', node: 0, adapter: 6, tokens: 3, prompt: 1241 },
    ]);
  }, 30_000);
  // Seed 910 (--keep 10,11,12,13,14,15,16,17,18,19,22,23,24,25,26,28,29,30,31,32,33,34,35,36,37,38;
  // also seeds 748 and 1484): Redis restarts empty at 2983 ms, down 2.3 s. Node 0 and node 1, deciding alone,
  // each claim `code` on the replica they picked (replica-2 and replica-0, in their local stores)
  // and wait for room there: every replica holds its one adapter in use. Redis is back with no
  // placement; once room frees (11.4 s), each loads on its own stale claim, both in quiet: `code
  // loading on replica-2 and replica-0 at once`. A load that waited for room now claims the
  // placement again first, and follows another node's (test/core/placement-recheck.test.ts).
  // Since the replicas load names with a comma (dst-reach) this schedule no longer reaches the
  // break with the re-check taken out: seed 962 below does.
  it('seed 910: a load that waited for room checks its placement claim again', async () => {
    const r = await runSchedule({
      seed: 910,
      world: { ...WORLD, adapters: WORLD.adapters.slice(0, 11), loadMs: 800, decodeMsPerStep: 50 },
      actions: [
        { at: 2282, kind: 'request', node: 0, adapter: 10, tokens: 1, prompt: 803 },
        { at: 2311, kind: 'request', node: 2, adapter: 3, tokens: 2, prompt: 1638 },
        { at: 2585, kind: 'request', node: 0, adapter: 3, tokens: 4, prompt: 1614 },
        { at: 2646, kind: 'request', node: 0, adapter: 4, tokens: 5, prompt: 285 },
        { at: 2653, kind: 'request', node: 1, adapter: 5, tokens: 6, prompt: 479 },
        { at: 2696, kind: 'request', node: 1, adapter: 8, tokens: 4, prompt: 1628 },
        { at: 2701, kind: 'request', node: 0, adapter: -1, tokens: 2, prompt: 981 },
        { at: 2890, kind: 'request', node: 2, adapter: 6, tokens: 48, prompt: 851 },
        { at: 2983, kind: 'redis-restart', empty: true, downMs: 2300 },
        { at: 2990, kind: 'request', node: 2, adapter: 6, tokens: 2, prompt: 1501 },
        { at: 3504, kind: 'request', node: 1, adapter: -1, tokens: 4, prompt: 1176 },
        { at: 3532, kind: 'request', node: 2, adapter: 6, tokens: 3, prompt: 1710 },
        { at: 3879, kind: 'request', node: 2, adapter: 5, tokens: 6, prompt: 1112 },
        { at: 3917, kind: 'request', node: 2, adapter: 6, tokens: 1, prompt: 374 },
        { at: 3999, kind: 'request', node: 0, adapter: 5, tokens: 4, prompt: 1050 },
        { at: 4249, kind: 'request', node: 1, adapter: 5, tokens: 1, prompt: 232 },
        { at: 4685, kind: 'request', node: 2, adapter: 5, tokens: 3, prompt: 126 },
        { at: 4710, kind: 'request', node: 2, adapter: 1, tokens: 4, prompt: 1389 },
        { at: 4862, kind: 'request', node: 1, adapter: 6, tokens: 3, prompt: 411 },
        { at: 5335, kind: 'request', node: 1, adapter: 2, tokens: 2, prompt: 818 },
        { at: 5380, kind: 'request', node: 0, adapter: 8, tokens: 1, prompt: 1734 },
        { at: 5576, kind: 'skew', node: 2, ms: -187 },
        { at: 5610, kind: 'request', node: 0, adapter: 1, tokens: 4, prompt: 1523 },
        { at: 5718, kind: 'request', node: 2, adapter: 5, tokens: 6, prompt: 1550 },
        { at: 5774, kind: 'request', node: 1, adapter: 7, tokens: 6, prompt: 1581 },
        { at: 5955, kind: 'request', node: 1, adapter: -1, tokens: 6, prompt: 1497 },
      ],
    });
    expect(r.violation).toBeUndefined();
  }, 30_000);
  // Seed 962 on the current generator (shrunk by one action only): found with the placement's
  // re-check taken out (`math loading on replica-1 and replica-0 at once`, after record changes, a
  // FLUSHALL, a process restart and replica faults); the seed 910 schedule above no longer reaches
  // the break once the replicas load names with a comma. Not diagnosed step by step.
  it('seed 962: a load that waited for room checks its placement claim again (current generator)', async () => {
    const r = await runSchedule({
      seed: 962,
      world: {
        nodes: 3,
        replicas: 2,
        maxLoadedAdapters: 2,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math', 'law', 'med'],
        loadMs: 800,
        decodeMsPerStep: 50,
        coldLoadsPerMinute: 1000,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 1000,
        spanMs: 6000,
        staticAdapters: ['sql,chat'],
      },
      actions: [
        { at: 232, kind: 'request', node: 0, adapter: 8, tokens: 5, prompt: 453 },
        { at: 576, kind: 'record-change', otherState: false, gapMs: 1194 },
        { at: 602, kind: 'request', node: 2, adapter: -1, tokens: 6, prompt: 1909 },
        { at: 931, kind: 'request', node: 0, adapter: 4, tokens: 4, prompt: 347 },
        { at: 1004, kind: 'flushall' },
        { at: 1120, kind: 'request', node: 0, adapter: 9, tokens: 6, prompt: 1670 },
        { at: 1453, kind: 'request', node: 0, adapter: 5, tokens: 6, prompt: 1547 },
        { at: 1505, kind: 'request', node: 2, adapter: 4, tokens: 1, prompt: 255 },
        { at: 1583, kind: 'slow-load', replica: 1, ms: 3142, slowMs: 1108 },
        { at: 1724, kind: 'request', node: 2, adapter: 2, tokens: 6, prompt: 1786 },
        { at: 1886, kind: 'request', node: 0, adapter: 2, tokens: 2, prompt: 468 },
        { at: 2003, kind: 'request', node: 0, adapter: 9, tokens: 4, prompt: 385 },
        { at: 2215, kind: 'request', node: 0, adapter: 8, tokens: 59, prompt: 874 },
        { at: 2319, kind: 'request', node: 2, adapter: 6, tokens: 2, prompt: 287 },
        { at: 2343, kind: 'request', node: 1, adapter: 4, tokens: 5, prompt: 421 },
        { at: 2530, kind: 'request', node: 0, adapter: 5, tokens: 4, prompt: 1108 },
        { at: 2879, kind: 'record-change', otherState: false, gapMs: 672 },
        { at: 2896, kind: 'replica-outage', replica: 1, ms: 2852, mode: 'hang' },
        { at: 3143, kind: 'request', node: 2, adapter: 0, tokens: 2, prompt: 17 },
        { at: 3270, kind: 'request', node: 0, adapter: 9, tokens: 6, prompt: 263 },
        { at: 3363, kind: 'request', node: 0, adapter: 3, tokens: 3, prompt: 1765 },
        { at: 3438, kind: 'request', node: 2, adapter: 3, tokens: 1, prompt: 687 },
        { at: 3442, kind: 'request', node: 1, adapter: 3, tokens: 6, prompt: 1003 },
        { at: 3488, kind: 'request', node: 1, adapter: 0, tokens: 3, prompt: 568 },
        { at: 3491, kind: 'process-restart', node: 0 },
        { at: 3978, kind: 'request', node: 2, adapter: -1, tokens: 3, prompt: 1930 },
        { at: 4087, kind: 'replica-outage', replica: 1, ms: 1805, mode: 'error500' },
        { at: 4378, kind: 'request', node: 1, adapter: 6, tokens: 2, prompt: 521 },
        { at: 4478, kind: 'request', node: 2, adapter: 2, tokens: 3, prompt: 405 },
        { at: 4607, kind: 'request', node: 2, adapter: 4, tokens: 52, prompt: 1516 },
        { at: 4783, kind: 'request', node: 2, adapter: 0, tokens: 5, prompt: 1892 },
        { at: 4788, kind: 'request', node: 0, adapter: 5, tokens: 4, prompt: 818 },
        { at: 4872, kind: 'request', node: 2, adapter: 7, tokens: 3, prompt: 1498 },
        { at: 4935, kind: 'request', node: 0, adapter: 1, tokens: 3, prompt: 680 },
        { at: 5195, kind: 'request', node: 1, adapter: 2, tokens: 4, prompt: 1834 },
        { at: 5411, kind: 'request', node: 0, adapter: 1, tokens: 5, prompt: 987 },
        { at: 5448, kind: 'request', node: 1, adapter: 7, tokens: 6, prompt: 1990 },
        { at: 5456, kind: 'record-change', otherState: false, gapMs: 155 },
        { at: 5733, kind: 'request', node: 1, adapter: -1, tokens: 6, prompt: 586 },
      ],
    });
    expect(r.violation).toBeUndefined();
  }, 30_000);
  // Seed 1004317 (all 16 actions; none can be dropped): node 0's request for `math`, decided alone
  // during a Redis restart, loads it on replica-0 (381-3133 ms); its second load finds no slot and
  // it is decided again, now on replica-0 as a holder: no placement claim. Its lease finds `math`
  // unloading there (node 2, 3850 ms), so it waits for room and loads `math` at 7903 ms with no
  // claim, while node 1's request, placed on replica-1, loads it there (6446-7947 ms). A decision
  // on a holder whose lease finds the adapter gone claims the placement before its load.
  it('seed 1004317: a decision on a holder whose lease finds the adapter gone claims the placement first', async () => {
    await holds(
      1004317,
      {
        ...WORLD,
        replicas: 2,
        adapters: WORLD.adapters.slice(0, 8),
        spanMs: 2000,
        upstreamTimeoutMs: 5000,
      },
      [
        { at: 111, kind: 'request', node: 2, adapter: 5, tokens: 6, prompt: 1056 },
        { at: 121, kind: 'request', node: 2, adapter: 4, tokens: 5, prompt: 1579 },
        { at: 334, kind: 'redis-restart', empty: false, downMs: 723 },
        { at: 376, kind: 'request', node: 0, adapter: 6, tokens: 5, prompt: 1815 },
        { at: 408, kind: 'request', node: 2, adapter: 0, tokens: 1, prompt: 201 },
        { at: 663, kind: 'flushall' },
        { at: 952, kind: 'request', node: 0, adapter: 3, tokens: 5, prompt: 384 },
        { at: 977, kind: 'request', node: 2, adapter: 4, tokens: 6, prompt: 927 },
        { at: 996, kind: 'request', node: 0, adapter: -1, tokens: 1, prompt: 74 },
        { at: 1132, kind: 'request', node: 2, adapter: 7, tokens: 1, prompt: 1690 },
        { at: 1287, kind: 'request', node: 0, adapter: 0, tokens: 3, prompt: 382 },
        { at: 1294, kind: 'request', node: 0, adapter: 7, tokens: 2, prompt: 445 },
        { at: 1368, kind: 'request', node: 2, adapter: -1, tokens: 23, prompt: 935 },
        { at: 1762, kind: 'request', node: 2, adapter: 3, tokens: 3, prompt: 1064 },
        { at: 1852, kind: 'request', node: 2, adapter: 7, tokens: 2, prompt: 1473 },
        { at: 1862, kind: 'request', node: 1, adapter: 6, tokens: 1, prompt: 14 },
      ],
    );
  }, 30_000);
  // Seed 719 at node_ttl_ms 500 (--keep 0,1,2; no fault): node 2 placed `chat` on replica-2 at 1,937 ms and
  // loaded it there; node 1, deciding at 1,940 ms, saw that placement with node 2's request queued on it,
  // predicted it 1,385 ms against 1,086 ms for a copy on replica-1 (past the 250 ms saturation margin) and
  // claimed a copy past it (`seen`): two loads at once, on purpose (docs/routing.md). The check took it for
  // two nodes racing; it now lets a copy placed past the other load's placement overlap it.
  it('seed 719: a copy spread past a saturated placement is no second load of a burst', async () => {
    await holds(
      719,
      {
        ...WORLD,
        maxLoadedAdapters: 2,
        adapters: WORLD.adapters.slice(0, 8),
        decodeMsPerStep: 50,
        coldLoadsPerMinute: 6,
        spanMs: 2000,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 500,
      },
      [
        { at: 1244, kind: 'request', node: 1, adapter: -1, tokens: 1, prompt: 280 },
        { at: 1933, kind: 'request', node: 2, adapter: 1, tokens: 2, prompt: 1201 },
        { at: 1939, kind: 'request', node: 1, adapter: 1, tokens: 5, prompt: 1713 },
      ],
    );
  }, 30_000);
});

describe("each cold adapter loaded once per burst: a spread's placement dropped under its load", () => {
  // Seed 2416114 (all 56 actions: dropping any one lets it pass; no fault, no client draw, failing on
  // f89a80c and on 1470bf12 before it): the router's. Node 2's request 31 placed `code` on replica-0
  // (2,872 ms) and its load there timed out (5,876; vLLM landed it at 6,328). Request 49, seeing
  // replica-0 saturated, spread `code` to replica-1 past it (5,474) and loaded it there (5,480-6,987).
  // The store answered the spread "yours" but kept the placement on replica-0 with request 31's claim
  // alone; request 31 gave it back at 5,883, dropping it under request 49's load. Request 55 (6,307),
  // seeing no placement, placed `code` on replica-2 (6,813) and loaded it there beside replica-1's:
  // "code loading on http://replica-1:8000 and http://replica-2:8000 at once". As seed 2300's, a load's
  // placement must stand until its load is done: a spread now moves the placement to its replica
  // (the `place` script, MemoryFleetStore.claimPlacement), so request 55 follows replica-1, or spreads
  // past it on purpose.
  it('seed 2416114: a spread places the adapter on its replica for its load', async () => {
    await holds(
      2416114,
      {
        nodes: 3,
        replicas: 3,
        maxLoadedAdapters: 4,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math', 'law', 'med'],
        loadMs: 1500,
        decodeMsPerStep: 50,
        coldLoadsPerMinute: 1000,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 1000,
        spanMs: 6627,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 500,
        sloClasses: [
          { name: 'interactive', ttft_ms: 1000, priority: 0 },
          { name: 'batch', ttft_ms: 95832, priority: -1 },
        ],
        queueTimeoutMs: 2384,
        maxNumSeqs: 4,
        prefetch: { intervalMs: 500, halfLifeMs: 3000, loadsPerMinute: 1, hysteresis: 0, evictFactor: 1 },
      },
      [
        { at: 77, kind: 'request', node: 2, adapter: 3, tokens: 4, prompt: 506, cls: 'interactive' },
        { at: 158, kind: 'request', node: 1, adapter: -1, tokens: 12, prompt: 163, cls: 'batch' },
        { at: 187, kind: 'request', node: 2, adapter: 4, tokens: 6, prompt: 141 },
        { at: 246, kind: 'request', node: 1, adapter: -1, tokens: 19, prompt: 345, cls: 'batch' },
        { at: 307, kind: 'request', node: 2, adapter: 0, tokens: 56, prompt: 479, cls: 'interactive' },
        { at: 349, kind: 'request', node: 1, adapter: -1, tokens: 29, prompt: 164, cls: 'batch' },
        { at: 460, kind: 'request', node: 1, adapter: 2, tokens: 1, prompt: 156, cls: 'batch' },
        { at: 486, kind: 'request', node: 2, adapter: 1, tokens: 56, prompt: 1650, cls: 'interactive' },
        { at: 588, kind: 'request', node: 2, adapter: 1, tokens: 23, prompt: 1044, cls: 'interactive' },
        { at: 636, kind: 'request', node: 0, adapter: 0, tokens: 2, prompt: 504, cls: 'interactive' },
        { at: 691, kind: 'request', node: 1, adapter: 7, tokens: 1, prompt: 682, cls: 'interactive' },
        { at: 692, kind: 'request', node: 2, adapter: 6, tokens: 31, prompt: 1580, cls: 'interactive' },
        { at: 800, kind: 'request', node: 2, adapter: 7, tokens: 32, prompt: 1535, cls: 'interactive' },
        { at: 831, kind: 'request', node: 1, adapter: 4, tokens: 2, prompt: 1941, cls: 'interactive' },
        { at: 959, kind: 'request', node: 2, adapter: -1, tokens: 5, prompt: 1102, cls: 'batch' },
        { at: 1053, kind: 'request', node: 2, adapter: 7, tokens: 44, prompt: 1134, cls: 'interactive' },
        { at: 1189, kind: 'request', node: 1, adapter: 6, tokens: 6, prompt: 242, cls: 'batch' },
        { at: 1223, kind: 'request', node: 2, adapter: 6, tokens: 46, prompt: 1049, cls: 'interactive' },
        { at: 1376, kind: 'request', node: 2, adapter: 6, tokens: 51, prompt: 1769, cls: 'interactive' },
        { at: 1498, kind: 'request', node: 2, adapter: 7, tokens: 48, prompt: 1517, cls: 'interactive' },
        { at: 1505, kind: 'request', node: 1, adapter: 8, tokens: 4, prompt: 1291, cls: 'interactive' },
        { at: 1559, kind: 'request', node: 2, adapter: 6, tokens: 1, prompt: 266, cls: 'interactive' },
        { at: 1607, kind: 'request', node: 2, adapter: 1, tokens: 24, prompt: 1513, cls: 'interactive' },
        { at: 1630, kind: 'request', node: 0, adapter: 2, tokens: 6, prompt: 964, cls: 'interactive' },
        { at: 1653, kind: 'request', node: 2, adapter: -1, tokens: 3, prompt: 50, cls: 'batch' },
        { at: 1827, kind: 'request', node: 2, adapter: 4, tokens: 35, prompt: 1972, cls: 'interactive' },
        { at: 1938, kind: 'request', node: 2, adapter: 7, tokens: 2, prompt: 1416, cls: 'interactive' },
        { at: 1942, kind: 'request', node: 2, adapter: 2, tokens: 20, prompt: 1842, cls: 'interactive' },
        { at: 2208, kind: 'request', node: 2, adapter: 5, tokens: 60, prompt: 1874, cls: 'interactive' },
        { at: 2409, kind: 'request', node: 2, adapter: 2, tokens: 32, prompt: 1295, cls: 'interactive' },
        { at: 2618, kind: 'request', node: 2, adapter: 5, tokens: 58, prompt: 1888, cls: 'interactive' },
        { at: 2791, kind: 'request', node: 2, adapter: 0, tokens: 25, prompt: 1659, cls: 'interactive' },
        { at: 2792, kind: 'request', node: 2, adapter: -1, tokens: 4, prompt: 41, cls: 'batch' },
        { at: 3056, kind: 'request', node: 2, adapter: 4, tokens: 44, prompt: 1971, cls: 'interactive' },
        { at: 3170, kind: 'request', node: 2, adapter: 5, tokens: 25, prompt: 1616, cls: 'interactive' },
        { at: 3240, kind: 'request', node: 2, adapter: -1, tokens: 5, prompt: 194, cls: 'batch' },
        { at: 3296, kind: 'request', node: 2, adapter: 6, tokens: 45, prompt: 1885, cls: 'interactive' },
        { at: 3337, kind: 'request', node: 2, adapter: -1, tokens: 4, prompt: 139, cls: 'batch' },
        { at: 3468, kind: 'request', node: 2, adapter: 6, tokens: 20, prompt: 1239, cls: 'interactive' },
        { at: 3601, kind: 'request', node: 2, adapter: 3, tokens: 57, prompt: 1064, cls: 'interactive' },
        { at: 3606, kind: 'request', node: 2, adapter: -1, tokens: 2, prompt: 76, cls: 'batch' },
        { at: 3703, kind: 'request', node: 2, adapter: 1, tokens: 37, prompt: 1119, cls: 'interactive' },
        { at: 3812, kind: 'request', node: 2, adapter: 4, tokens: 44, prompt: 1175, cls: 'interactive' },
        { at: 4100, kind: 'request', node: 2, adapter: 4, tokens: 47, prompt: 1441, cls: 'interactive' },
        { at: 4302, kind: 'request', node: 2, adapter: 1, tokens: 39, prompt: 1309, cls: 'interactive' },
        { at: 4415, kind: 'request', node: 2, adapter: 2, tokens: 48, prompt: 1997, cls: 'interactive' },
        { at: 4685, kind: 'request', node: 2, adapter: 2, tokens: 60, prompt: 1464, cls: 'interactive' },
        { at: 4862, kind: 'request', node: 2, adapter: 4, tokens: 59, prompt: 1375, cls: 'interactive' },
        { at: 4962, kind: 'request', node: 2, adapter: 5, tokens: 41, prompt: 1205, cls: 'interactive' },
        { at: 5173, kind: 'request', node: 2, adapter: 7, tokens: 24, prompt: 1484, cls: 'interactive' },
        { at: 5389, kind: 'request', node: 2, adapter: 7, tokens: 44, prompt: 1004, cls: 'interactive' },
        { at: 5533, kind: 'request', node: 2, adapter: 4, tokens: 56, prompt: 1927, cls: 'interactive' },
        { at: 5811, kind: 'request', node: 2, adapter: 0, tokens: 33, prompt: 1006, cls: 'interactive' },
        { at: 6104, kind: 'request', node: 2, adapter: 4, tokens: 39, prompt: 1579, cls: 'interactive' },
        { at: 6307, kind: 'request', node: 2, adapter: 5, tokens: 44, prompt: 1272, cls: 'interactive' },
        { at: 6527, kind: 'request', node: 2, adapter: 4, tokens: 22, prompt: 1410, cls: 'interactive' },
      ],
    );
  }, 60_000);
});
