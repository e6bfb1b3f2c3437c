/**
 * Kept schedules (./holds.ts) for "each cold adapter loaded once per burst" (docs/reliability.md):
 * loads given up on, decided alone, answered "already loaded", or split across a record change.
 */
import { runSchedule } from '../../../dst/run';
import { WORLD, WORLD_2300, holds } from './holds';

describe('schedules the simulation found', () => {
  // Seed 549 (--keep 0,1,2,3,4,5,6,7,8,9,10,11,12,14,16,17,19,20,21,22,24,26,27,28,29,30,31,34,35,37,39):
  // node 0, deciding alone while Redis restarts empty, loads `law` on replica-0 at 3 s; its call
  // times out (load_timeout_ms), the replica goes on and lands it at 11.1 s, unknown to every
  // node. Node 2, with Redis answering everyone since 5 s, loads `law` on replica-1 at 10.1 s. The
  // check held that pair to "one load per burst"; docs/reliability.md promises it for loads
  // decided together ("however many requests ask for it at once"), not for one begun during a
  // fault and given up on. Both loads must now begin in quiet for the check to apply.
  it('seed 549: a load begun during an outage and given up on is not a second load of the burst', async () => {
    const r = await runSchedule({
      seed: 549,
      world: {
        ...WORLD,
        replicas: 2,
        maxLoadedAdapters: 4,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math', 'law', 'med', 'fin'],
      },
      actions: [
        { at: 591, kind: 'request', node: 1, adapter: 3, tokens: 3, prompt: 1897 },
        { at: 636, kind: 'request', node: 1, adapter: 5, tokens: 3, prompt: 1444 },
        { at: 693, kind: 'request', node: 0, adapter: 0, tokens: 2, prompt: 71 },
        { at: 736, kind: 'request', node: 2, adapter: 2, tokens: 5, prompt: 1497 },
        { at: 780, kind: 'request', node: 2, adapter: 6, tokens: 6, prompt: 608 },
        { at: 1015, kind: 'request', node: 1, adapter: 1, tokens: 3, prompt: 461 },
        { at: 1021, kind: 'request', node: 0, adapter: 1, tokens: 3, prompt: 1663 },
        { at: 1215, kind: 'request', node: 0, adapter: 4, tokens: 4, prompt: 759 },
        { at: 1301, kind: 'request', node: 0, adapter: 2, tokens: 2, prompt: 353 },
        { at: 1361, kind: 'skew', node: 1, ms: -98 },
        { at: 1612, kind: 'slow', node: 1, ms: 2212, slowMs: 1045 },
        { at: 1654, kind: 'request', node: 2, adapter: 9, tokens: 1, prompt: 1460 },
        { at: 1813, kind: 'request', node: 1, adapter: 8, tokens: 6, prompt: 910 },
        { at: 1949, kind: 'request', node: 1, adapter: 0, tokens: 3, prompt: 935 },
        { at: 2289, kind: 'flushall' },
        { at: 2469, kind: 'redis-restart', empty: true, downMs: 2483 },
        { at: 2822, kind: 'request', node: 2, adapter: 1, tokens: 2, prompt: 822 },
        { at: 2837, kind: 'request', node: 0, adapter: 3, tokens: 5, prompt: 1389 },
        { at: 3027, kind: 'request', node: 0, adapter: 7, tokens: 5, prompt: 495 },
        { at: 3199, kind: 'request', node: 1, adapter: 4, tokens: 5, prompt: 1069 },
        { at: 3340, kind: 'request', node: 1, adapter: 6, tokens: 59, prompt: 495 },
        { at: 3750, kind: 'request', node: 1, adapter: -1, tokens: 3, prompt: 344 },
        { at: 3783, kind: 'request', node: 2, adapter: 6, tokens: 5, prompt: 64 },
        { at: 4136, kind: 'request', node: 2, adapter: 4, tokens: 3, prompt: 898 },
        { at: 4220, kind: 'request', node: 2, adapter: 7, tokens: 1, prompt: 56 },
        { at: 4300, kind: 'request', node: 1, adapter: 4, tokens: 37, prompt: 1785 },
        { at: 4485, kind: 'request', node: 0, adapter: 5, tokens: 4, prompt: 1563 },
        { at: 5164, kind: 'request', node: 2, adapter: 9, tokens: 2, prompt: 1000 },
        { at: 5189, kind: 'request', node: 0, adapter: 1, tokens: 5, prompt: 1226 },
        { at: 5632, kind: 'request', node: 2, adapter: 1, tokens: 2, prompt: 263 },
        { at: 5702, kind: 'request', node: 1, adapter: 8, tokens: 6, prompt: 863 },
      ],
    });
    expect(r.violation).toBeUndefined();
  }, 30_000);
  // Seed 2300 shrunk by its invariant alone (--keep 6,8,13,14,15,21; no fault) breaks another
  // way: node 2's load of `math` on replica-1 waits behind two others there and times out at
  // 4,971 ms (3 s); its request gets 502 and the lock ends. Its next request for `math` (4,996
  // ms) loads it on replica-0 while replica-1 goes on and lands the first at 5,407 ms. As seed
  // 549's load given up on during a fault, a load the router gave up on (no answer) is nobody's
  // to join: the check held it to "one load per burst" only because no fault was under way.
  it('seed 2300: a load the router gave up on, fault or not, is not a second load of the burst', async () => {
    await holds(2300, WORLD_2300, [
      { at: 884, kind: 'request', node: 1, adapter: 0, tokens: 5, prompt: 713 },
      { at: 954, kind: 'request', node: 2, adapter: 1, tokens: 1, prompt: 1012 },
      { at: 1655, kind: 'request', node: 2, adapter: -1, tokens: 1, prompt: 441 },
      { at: 1727, kind: 'request', node: 1, adapter: 5, tokens: 2, prompt: 1166 },
      { at: 1958, kind: 'request', node: 2, adapter: 6, tokens: 6, prompt: 484 },
      { at: 4996, kind: 'request', node: 2, adapter: 6, tokens: 6, prompt: 986 },
    ]);
  }, 30_000);
  // Seed 65 (--keep 0,1,4,5,11,13,15,16,17,18,19,27,28,29,30,31,32,35,36,37,38): a record change
  // moves every node to the other database (2047 ms, pushed 1 s apart); node 2's plugin server
  // restarts at 4261 ms and the model started it on the first database again, as if Kong gave
  // it the old record. Node 0 (new state) and node 2 (old state) then place `team` each in its
  // own state and load it on replica-0 and replica-1 at once. A restarted process gets the
  // node's current record; the model, not src/, was wrong.
  it('seed 65: a restarted plugin server takes the current redis record, not the first', async () => {
    const r = await runSchedule({
      seed: 65,
      world: {
        ...WORLD,
        replicas: 2,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math', 'law'],
        coldLoadsPerMinute: 6,
        ttftSloMs: 0,
        staticAdapters: ['sql,chat'],
      },
      actions: [
        { at: 72, kind: 'request', node: 2, adapter: 0, tokens: 4, prompt: 810 },
        { at: 108, kind: 'request', node: 1, adapter: 6, tokens: 38, prompt: 326 },
        { at: 699, kind: 'request', node: 1, adapter: 1, tokens: 6, prompt: 1411 },
        { at: 714, kind: 'request', node: 0, adapter: 1, tokens: 6, prompt: 1993 },
        { at: 1595, kind: 'request', node: 2, adapter: 1, tokens: 1, prompt: 1845 },
        { at: 1694, kind: 'switch', lost: 6 },
        { at: 2041, kind: 'request', node: 2, adapter: 4, tokens: 5, prompt: 1453 },
        { at: 2047, kind: 'record-change', otherState: true, gapMs: 1006 },
        { at: 2563, kind: 'request', node: 1, adapter: 6, tokens: 60, prompt: 349 },
        { at: 2656, kind: 'request', node: 0, adapter: 5, tokens: 4, prompt: 1541 },
        { at: 2658, kind: 'request', node: 0, adapter: 7, tokens: 1, prompt: 620 },
        { at: 4243, kind: 'request', node: 1, adapter: 7, tokens: 2, prompt: 730 },
        { at: 4261, kind: 'process-restart', node: 2 },
        { at: 4319, kind: 'request', node: 0, adapter: 0, tokens: 43, prompt: 457 },
        { at: 4468, kind: 'request', node: 2, adapter: 1, tokens: 5, prompt: 495 },
        { at: 4510, kind: 'request', node: 0, adapter: 2, tokens: 4, prompt: 437 },
        { at: 4667, kind: 'request', node: 0, adapter: 6, tokens: 2, prompt: 574 },
        { at: 5264, kind: 'request', node: 2, adapter: 3, tokens: 6, prompt: 83 },
        { at: 5266, kind: 'redis-restart', empty: false, downMs: 1162 },
        { at: 5358, kind: 'request', node: 0, adapter: 3, tokens: 37, prompt: 1893 },
        { at: 5869, kind: 'request', node: 1, adapter: 0, tokens: 1, prompt: 210 },
      ],
    });
    expect(r.violation).toBeUndefined();
  }, 30_000);
  // Seed 1001999 (--keep 0,1,2,3,4,5,6,7,11,14,15): node 0's load of `math` on replica-0 (from
  // 1619 ms) timed out at 4624 ms; node 2's first request for `math` loaded it there again at
  // 4629 ms, and its second, joining that load, reached its wait on the chosen replica at 4994 ms:
  // the 503 (`adapter_slots_busy`) was escalated and the request loaded `math` on replica-1 beside
  // the load under way. A wait for the adapter's own load is no lack of room: it is not escalated.
  it("seed 1001999: a wait for the adapter's own load under way is not escalated to a second load", async () => {
    await holds(
      1001999,
      {
        ...WORLD,
        replicas: 2,
        maxLoadedAdapters: 4,
        adapters: WORLD.adapters.slice(0, 7),
        decodeMsPerStep: 50,
        ttftSloMs: 0,
        spanMs: 2000,
        queueTimeoutMs: 4000,
        upstreamTimeoutMs: 5000,
      },
      [
        { at: 365, kind: 'request', node: 2, adapter: -1, tokens: 6, prompt: 1133 },
        { at: 563, kind: 'request', node: 1, adapter: 5, tokens: 5, prompt: 667 },
        { at: 692, kind: 'request', node: 2, adapter: 2, tokens: 4, prompt: 1210 },
        { at: 929, kind: 'request', node: 1, adapter: 0, tokens: 49, prompt: 932 },
        { at: 1161, kind: 'request', node: 2, adapter: 3, tokens: 4, prompt: 75 },
        { at: 1232, kind: 'request', node: 1, adapter: -1, tokens: 5, prompt: 813 },
        { at: 1606, kind: 'request', node: 0, adapter: 6, tokens: 5, prompt: 996 },
        { at: 1817, kind: 'request', node: 2, adapter: 6, tokens: 5, prompt: 1324 },
        { at: 1955, kind: 'request', node: 1, adapter: 0, tokens: 2, prompt: 1300 },
        { at: 1988, kind: 'request', node: 2, adapter: 6, tokens: 23, prompt: 707 },
      ],
    );
  }, 30_000);
  // Seed 1015286 (--keep 0,1,2,3,4,5,6,12,13,14,15; no fault): replica-1 runs its loads one after
  // another (the simulated vLLM: between engine steps), four queued, so node 0's load of `team`
  // there, sent at 683 ms, has no answer by load_timeout_ms (3 s): node 0 gives up at 3683 ms and
  // ends its load lock. Node 2's request, which waited for that load, decides again: replica-1 has
  // no slot left (`geo` took the one freed), so it loads `team` on replica-0 from 3710 ms, while
  // replica-1 goes on and lands node 0's load at 6315 ms. The router cannot know a load it gave
  // up on will land; the check exempted that only for a load begun during a fault. It now exempts
  // any load its sender gave up on before the other began; it was failing on main for that
  // reason, not a bug in src/.
  it('seed 1015286: a load given up on at load_timeout_ms may land beside a later one', async () => {
    await holds(
      1015286,
      {
        ...WORLD,
        replicas: 2,
        maxLoadedAdapters: 4,
        decodeMsPerStep: 50,
        ttftSloMs: 0,
        spanMs: 2000,
        queueTimeoutMs: 4000,
        upstreamTimeoutMs: 5000,
      },
      [
        { at: 128, kind: 'request', node: 0, adapter: 1, tokens: 6, prompt: 57 },
        { at: 297, kind: 'request', node: 2, adapter: 10, tokens: 5, prompt: 1655 },
        { at: 314, kind: 'request', node: 0, adapter: 6, tokens: 4, prompt: 527 },
        { at: 451, kind: 'request', node: 1, adapter: 0, tokens: 1, prompt: 747 },
        { at: 453, kind: 'request', node: 1, adapter: 5, tokens: 3, prompt: 135 },
        { at: 539, kind: 'request', node: 1, adapter: 9, tokens: 2, prompt: 1411 },
        { at: 669, kind: 'request', node: 0, adapter: 3, tokens: 1, prompt: 302 },
        { at: 1420, kind: 'request', node: 1, adapter: 2, tokens: 6, prompt: 574 },
        { at: 1610, kind: 'request', node: 0, adapter: 5, tokens: 4, prompt: 1526 },
        { at: 1618, kind: 'request', node: 2, adapter: 3, tokens: 3, prompt: 1939 },
        { at: 1914, kind: 'request', node: 0, adapter: 11, tokens: 5, prompt: 528 },
      ],
    );
  }, 30_000);
  // Seed 751278 (--keep 6,...,15,17,...,26): node 2, deciding alone after Redis restarted empty, sends a
  // load of `med` to replica-1 at 1,822 ms over a slow path (2,186 ms); replica-1 begins it at 4,114 ms,
  // past the quiet threshold, beside node 0's load of `med` on replica-0 decided with Redis. Quiet counts
  // from the decision (invariants.ts `load`): a load decided alone is nobody's to join.
  it('seed 751278: a load decided alone that reached its replica once quiet is not held to one per burst', async () => {
    await holds(
      751278,
      {
        nodes: 3,
        replicas: 2,
        maxLoadedAdapters: 1,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math', 'law', 'med', 'fin'],
        loadMs: 200,
        decodeMsPerStep: 100,
        coldLoadsPerMinute: 1000,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 1000,
        spanMs: 4355,
        staticAdapters: ['sql,chat'],
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 500,
      },
      [
        { at: 419, kind: 'request', node: 2, adapter: 1, tokens: 1, prompt: 1675 },
        { at: 419, kind: 'request', node: 2, adapter: 4, tokens: 3, prompt: 956 },
        { at: 514, kind: 'request', node: 2, adapter: 0, tokens: 5, prompt: 1506 },
        { at: 570, kind: 'request', node: 2, adapter: 8, tokens: 6, prompt: 609 },
        { at: 624, kind: 'request', node: 0, adapter: 7, tokens: 1, prompt: 1985 },
        { at: 679, kind: 'redis-restart', empty: true, downMs: 202 },
        { at: 762, kind: 'slow-path', node: 2, replica: 1, ms: 2186, hopMs: 2291 },
        { at: 851, kind: 'request', node: 0, adapter: 4, tokens: 1, prompt: 1313 },
        { at: 854, kind: 'request', node: 0, adapter: 0, tokens: 4, prompt: 318 },
        { at: 854, kind: 'request', node: 0, adapter: 0, tokens: 5, prompt: 616 },
        { at: 855, kind: 'slow-path', node: 0, replica: 1, ms: 881, hopMs: 2114 },
        { at: 855, kind: 'request', node: 0, adapter: 8, tokens: 1, prompt: 1128 },
        { at: 1330, kind: 'request', node: 0, adapter: 8, tokens: 6, prompt: 816 },
        { at: 1338, kind: 'request', node: 2, adapter: 9, tokens: 6, prompt: 540 },
        { at: 1636, kind: 'request', node: 0, adapter: 4, tokens: 5, prompt: 1665 },
        { at: 1751, kind: 'request', node: 2, adapter: 4, tokens: 1, prompt: 241 },
        { at: 3483, kind: 'request', node: 1, adapter: 3, tokens: 6, prompt: 1560 },
        { at: 3701, kind: 'request', node: 2, adapter: 3, tokens: 4, prompt: 1922 },
        { at: 3820, kind: 'request', node: 2, adapter: 9, tokens: 2, prompt: 1393 },
        { at: 3931, kind: 'request', node: 2, adapter: 1, tokens: 6, prompt: 746 },
      ],
    );
  }, 30_000);
});

describe('each cold adapter loaded once per burst: an "already loaded" answered at once', () => {
  // Seed 129648 (--keep 0,1,2,4,5,6,8,9,10,11,13,14,15,16,17,19,21,23,24,25,26,27,28,29,30,31,32,33,
  // 34,35,36,37,38,39,40,41,42,43,44,60; a crowd at node 2 and SLO classes), the check's: node 2's
  // load of `med` on replica-1, decided alone after a partition (1,506 ms), is given up on at 4,506
  // ms while the engine lands it at 4,563 ms; node 2's batch request waiting since 3,398 ms then
  // loads `med` on replica-0 (4,553-6,057 ms): a load given up on is nobody's to join. Node 0, back
  // on Redis, asks replica-1 to load `med` at 4,578 ms and is answered "already loaded" at once: no
  // load, yet the check counted it as `med` loading on replica-1 beside replica-0's.
  it('seed 129648: an "already loaded" answered at once is not a second load of the burst', async () => {
    await holds(
      129648,
      {
        nodes: 3,
        replicas: 3,
        maxLoadedAdapters: 4,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math', 'law', 'med', 'fin'],
        loadMs: 1500,
        decodeMsPerStep: 50,
        coldLoadsPerMinute: 1000,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 1000,
        spanMs: 5236,
        queueTimeoutMs: 2000,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 500,
        maxNumSeqs: 4,
        sloClasses: [
          { name: 'interactive', ttft_ms: 1000, priority: 0 },
          { name: 'batch', ttft_ms: 2500, priority: -1 },
        ],
      },
      [
        { at: 35, kind: 'request', node: 1, adapter: 1, tokens: 1, prompt: 314, cls: 'interactive' },
        { at: 139, kind: 'request', node: 0, adapter: 2, tokens: 4, prompt: 1628, cls: 'interactive' },
        { at: 157, kind: 'request', node: 2, adapter: 4, tokens: 3, prompt: 1562, cls: 'interactive' },
        { at: 237, kind: 'request', node: 0, adapter: 9, tokens: 1, prompt: 1996, cls: 'interactive' },
        { at: 467, kind: 'request', node: 0, adapter: 2, tokens: 2, prompt: 72, cls: 'interactive' },
        { at: 495, kind: 'partition', node: -1, ms: 858 },
        { at: 624, kind: 'request', node: 0, adapter: 8, tokens: 2, prompt: 1997, cls: 'interactive' },
        { at: 946, kind: 'request', node: 2, adapter: -1, tokens: 20, prompt: 1502, cls: 'interactive' },
        { at: 1019, kind: 'request', node: 2, adapter: 3, tokens: 46, prompt: 1770, cls: 'interactive' },
        { at: 1057, kind: 'request', node: 2, adapter: -1, tokens: 35, prompt: 1576, cls: 'interactive' },
        { at: 1210, kind: 'request', node: 0, adapter: 8, tokens: 3, prompt: 1066, cls: 'interactive' },
        { at: 1287, kind: 'request', node: 2, adapter: 1, tokens: 52, prompt: 1798, cls: 'batch' },
        { at: 1405, kind: 'request', node: 2, adapter: 0, tokens: 2, prompt: 35, cls: 'batch' },
        { at: 1503, kind: 'request', node: 2, adapter: 8, tokens: 37, prompt: 1730, cls: 'interactive' },
        { at: 1536, kind: 'request', node: 2, adapter: 7, tokens: 2, prompt: 614, cls: 'batch' },
        { at: 1742, kind: 'request', node: 0, adapter: 8, tokens: 2, prompt: 751, cls: 'interactive' },
        { at: 1809, kind: 'request', node: 2, adapter: 1, tokens: 2, prompt: 40, cls: 'batch' },
        { at: 1897, kind: 'request', node: 2, adapter: 7, tokens: 6, prompt: 1563 },
        { at: 1983, kind: 'request', node: 2, adapter: 3, tokens: 51, prompt: 1641 },
        { at: 2038, kind: 'request', node: 2, adapter: 3, tokens: 40, prompt: 1977, cls: 'interactive' },
        { at: 2138, kind: 'request', node: 2, adapter: 3, tokens: 23, prompt: 1644, cls: 'batch' },
        { at: 2220, kind: 'request', node: 2, adapter: 1, tokens: 49, prompt: 1420, cls: 'interactive' },
        { at: 2315, kind: 'request', node: 2, adapter: 8, tokens: 50, prompt: 1307, cls: 'interactive' },
        { at: 2794, kind: 'request', node: 2, adapter: 1, tokens: 26, prompt: 1359, cls: 'interactive' },
        { at: 2891, kind: 'request', node: 2, adapter: 1, tokens: 56, prompt: 1488, cls: 'batch' },
        { at: 2910, kind: 'request', node: 2, adapter: -1, tokens: 20, prompt: 1008, cls: 'interactive' },
        { at: 2947, kind: 'request', node: 2, adapter: 1, tokens: 32, prompt: 1233, cls: 'batch' },
        { at: 3036, kind: 'request', node: 2, adapter: 1, tokens: 59, prompt: 1619, cls: 'batch' },
        { at: 3047, kind: 'request', node: 2, adapter: 8, tokens: 58, prompt: 1861, cls: 'batch' },
        { at: 3060, kind: 'request', node: 2, adapter: 3, tokens: 59, prompt: 1710, cls: 'interactive' },
        { at: 3065, kind: 'request', node: 2, adapter: 1, tokens: 41, prompt: 1979, cls: 'interactive' },
        { at: 3274, kind: 'request', node: 2, adapter: 3, tokens: 50, prompt: 1596, cls: 'interactive' },
        { at: 3358, kind: 'request', node: 2, adapter: 8, tokens: 29, prompt: 1000, cls: 'interactive' },
        { at: 3398, kind: 'request', node: 2, adapter: 8, tokens: 42, prompt: 1408, cls: 'batch' },
        { at: 3427, kind: 'request', node: 2, adapter: 3, tokens: 58, prompt: 1990, cls: 'batch' },
        { at: 3575, kind: 'request', node: 2, adapter: 8, tokens: 47, prompt: 1845 },
        { at: 3630, kind: 'request', node: 2, adapter: -1, tokens: 24, prompt: 1739, cls: 'interactive' },
        { at: 3640, kind: 'request', node: 2, adapter: 1, tokens: 21, prompt: 1566, cls: 'batch' },
        { at: 3721, kind: 'request', node: 2, adapter: -1, tokens: 60, prompt: 1860, cls: 'batch' },
        { at: 4801, kind: 'request', node: 2, adapter: 8, tokens: 51, prompt: 1334, cls: 'batch' },
      ],
    );
  }, 30_000);
});

describe('each cold adapter loaded once per burst: nodes split across a record change to other state', () => {
  // Seed 1313402 (--keep 0-16; the sweep of 1,306,001-1,314,000 on branch dst-prefetch, no prefetch
  // drawn; the same on 414e55d), the check's: a `redis` record change to other state at 2,055 ms
  // reaches the nodes 3,113 ms apart (node 0 at once, node 1 at 5,168 ms, node 2 at 8,281 ms).
  // Node 2, still on the old state, loads `geo` on replica-0; node 1, on the new one, loads it on
  // another replica while that load runs (in the seed's full schedule at 6,596 and 7,221 ms, on
  // replica-1; on replica-2 in this one): neither state shows the other's lock (docs/reliability.md,
  // as for the undo of a load a peer on the new state made). The check took the world for quiet
  // past 4 s after the change began, while the nodes were still split; it now takes a load begun
  // within a move to other state as decided apart.
  it('seed 1313402: loads on the old and the new state during the move are not one burst', async () => {
    const r = await runSchedule({
      seed: 1313402,
      world: {
        ...WORLD,
        loadMs: 800,
        spanMs: 5055,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 2000,
      },
      actions: [
        { at: 20, kind: 'request', node: 2, adapter: 3, tokens: 3, prompt: 295 },
        { at: 29, kind: 'request', node: 2, adapter: 1, tokens: 3, prompt: 1557 },
        { at: 239, kind: 'request', node: 0, adapter: 9, tokens: 1, prompt: 380 },
        { at: 494, kind: 'request', node: 2, adapter: 2, tokens: 4, prompt: 1780 },
        { at: 496, kind: 'request', node: 2, adapter: 2, tokens: 4, prompt: 1174 },
        { at: 498, kind: 'request', node: 2, adapter: 0, tokens: 2, prompt: 1482 },
        { at: 498, kind: 'request', node: 2, adapter: 0, tokens: 6, prompt: 1302 },
        { at: 539, kind: 'request', node: 1, adapter: 11, tokens: 2, prompt: 683 },
        { at: 672, kind: 'request', node: 2, adapter: 11, tokens: 1, prompt: 281 },
        { at: 681, kind: 'request', node: 2, adapter: 8, tokens: 4, prompt: 1319 },
        { at: 696, kind: 'request', node: 2, adapter: -1, tokens: 6, prompt: 1468 },
        { at: 850, kind: 'request', node: 1, adapter: 2, tokens: 3, prompt: 1542 },
        { at: 971, kind: 'partition', node: 0, ms: 1078 },
        { at: 1094, kind: 'request', node: 1, adapter: 8, tokens: 2, prompt: 706 },
        { at: 1367, kind: 'request', node: 2, adapter: 9, tokens: 1, prompt: 372 },
        { at: 1735, kind: 'request', node: 2, adapter: 2, tokens: 41, prompt: 1554 },
        { at: 2055, kind: 'record-change', otherState: true, gapMs: 3113 },
      ],
    });
    expect(r.violation?.detail).toBeUndefined();
  }, 60_000);
});
