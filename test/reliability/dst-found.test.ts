/**
 * Schedules the deterministic simulation found breaking an invariant of docs/reliability.md on
 * main, kept as written (not as seeds, so a change to the generator keeps them): each replays
 * exactly and must hold every invariant now. `npm run dst -- --seed S --keep ...` printed them.
 */
import { runSchedule } from '../../dst/run';
import type { Schedule } from '../../dst/schedule';
import { health } from '../../src/scheduler/filters/health';

const WORLD: Schedule['world'] = {
  nodes: 3,
  replicas: 3,
  maxLoadedAdapters: 1,
  adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math', 'law', 'med', 'fin', 'bio', 'geo'],
  loadMs: 1500,
  decodeMsPerStep: 100,
  coldLoadsPerMinute: 1000,
  leaseMaxAgeMs: 4000,
  ttftSloMs: 1000,
  spanMs: 6000,
};

/** Seed 2300's world: two replicas of four slots, the static `sql,chat` on each. */
const WORLD_2300: Schedule['world'] = {
  ...WORLD,
  replicas: 2,
  maxLoadedAdapters: 4,
  adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math'],
  staticAdapters: ['sql,chat'],
  upstreamTimeoutMs: 5000,
};

/** Replays a kept schedule: every invariant must hold now. */
async function holds(seed: number, world: Schedule['world'], actions: Schedule['actions']): Promise<void> {
  expect((await runSchedule({ seed, world, actions })).violation).toBeUndefined();
}

describe('schedules the simulation found', () => {
  // Seed 101 (--keep 0,1,2,4,5,6,7,12,13,14): node 2, cut off from Redis, and node 0, degraded by
  // a Sentinel switch, each decide alone to load `team` on replica-0. vLLM serializes the two
  // loads: node 2's answers 200, node 0's 400 "already loaded", and node 0 (Redis back) sends its
  // request. Node 2, still alone, finds the replica over its limit of 1 and undoes the load on an
  // idle word asked before node 0's request came: `team unloaded with 0 running and 1 waiting`.
  // docs/reliability.md ("What still holds when Redis is lost for good") allows it: a node deciding
  // alone cannot see the requests others route. The checks now exempt an unload sent by a node
  // deciding alone, and only that one (it was failing on main for that reason, not a bug in src/).
  it('seed 101: an after-load undo by a node deciding alone is not held to (i)', async () => {
    const r = await runSchedule({
      seed: 101,
      world: WORLD,
      actions: [
        { at: 378, kind: 'partition', node: 2, ms: 2118 },
        { at: 502, kind: 'request', node: 0, adapter: 11, tokens: 4, prompt: 957 },
        { at: 718, kind: 'switch', lost: 0 },
        { at: 813, kind: 'request', node: 1, adapter: 4, tokens: 1, prompt: 953 },
        { at: 832, kind: 'request', node: 2, adapter: 3, tokens: 4, prompt: 991 },
        { at: 843, kind: 'request', node: 1, adapter: 1, tokens: 5, prompt: 907 },
        { at: 992, kind: 'request', node: 2, adapter: -1, tokens: 6, prompt: 1786 },
        { at: 1845, kind: 'request', node: 0, adapter: 3, tokens: 2, prompt: 1607 },
        { at: 1948, kind: 'request', node: 0, adapter: 1, tokens: 4, prompt: 21 },
        { at: 2030, kind: 'request', node: 2, adapter: 2, tokens: 6, prompt: 290 },
      ],
    });
    expect(r.violation).toBeUndefined();
  }, 30_000);
  // Seed 789 (--keep 1,2,3,4,5,6,8,10,11,12,13,14,20,21,22): a record change to another database
  // reaches node 0 at 595 ms, node 2 only at 2737 ms. Node 0's new runtime loads `team` on
  // replica-2 (from 621 ms, 3 s); node 2, still on the old state, loads it there too (1759 ms).
  // vLLM answers node 0 200 and node 2 "already loaded"; node 2 sends its request, and node 0's
  // after-load check, finding the replica over its limit of 1, undoes the load under it. The
  // record change's hold-off (docs/reliability.md: "the new state unloads nothing" until the old
  // runtime's decisions end and two probe intervals after) held off every unload but the undo.
  it("seed 789: no after-load undo during a record change's hold-off", async () => {
    const r = await runSchedule({
      seed: 789,
      world: {
        ...WORLD,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math'],
        decodeMsPerStep: 50,
        coldLoadsPerMinute: 3,
        ttftSloMs: 0,
      },
      actions: [
        { at: 553, kind: 'request', node: 0, adapter: 4, tokens: 6, prompt: 746 },
        { at: 584, kind: 'request', node: 0, adapter: -1, tokens: 45, prompt: 1223 },
        { at: 595, kind: 'record-change', otherState: true, gapMs: 1071 },
        { at: 602, kind: 'request', node: 0, adapter: 3, tokens: 5, prompt: 1848 },
        { at: 790, kind: 'request', node: 2, adapter: 0, tokens: 55, prompt: 1991 },
        { at: 907, kind: 'request', node: 0, adapter: 0, tokens: 2, prompt: 1095 },
        { at: 1423, kind: 'record-change', otherState: true, gapMs: 1495 },
        { at: 1608, kind: 'slow', node: 1, ms: 309, slowMs: 2500 },
        { at: 1709, kind: 'flushall' },
        { at: 1732, kind: 'request', node: 2, adapter: 3, tokens: 3, prompt: 951 },
        { at: 1755, kind: 'request', node: 2, adapter: 1, tokens: 4, prompt: 714 },
        { at: 1825, kind: 'request', node: 2, adapter: 6, tokens: 5, prompt: 297 },
        { at: 2420, kind: 'request', node: 2, adapter: 1, tokens: 4, prompt: 1316 },
        { at: 2808, kind: 'request', node: 0, adapter: 2, tokens: 3, prompt: 1473 },
        { at: 3172, kind: 'request', node: 0, adapter: 2, tokens: 3, prompt: 89 },
      ],
    });
    expect(r.violation).toBeUndefined();
  }, 30_000);
  // Seed 1111 (--keep 0,1,2,3,4,5,7,8,9,11,12,13,14,16,18,21,23,24,27,31,32,33,34,35,36,38,39):
  // node 0 and node 2, each cut off from Redis, decide alone to load `a` on replica-1 (5418 and
  // 5551 ms); both are back before the loads end (5504, 6491 ms; node 2's lease re-taken in
  // Redis). vLLM answers node 0 200 and node 2 "already loaded"; node 2 sends its request, and node
  // 0's after-load check (2.3 s after its hold-off ended) undoes the load under it. A load decided
  // alone is not undone once Redis is back: the trim after a poll asks the leases and the replica.
  it('seed 1111: no after-load undo of a load decided alone once Redis is back', async () => {
    const r = await runSchedule({
      seed: 1111,
      world: {
        ...WORLD,
        replicas: 2,
        maxLoadedAdapters: 4,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math', 'law'],
        decodeMsPerStep: 50,
      },
      actions: [
        { at: 89, kind: 'request', node: 1, adapter: 6, tokens: 2, prompt: 512 },
        { at: 112, kind: 'request', node: 1, adapter: 6, tokens: 6, prompt: 1505 },
        { at: 132, kind: 'request', node: 0, adapter: 3, tokens: 6, prompt: 1094 },
        { at: 421, kind: 'slow', node: 1, ms: 405, slowMs: 683 },
        { at: 437, kind: 'request', node: 1, adapter: 6, tokens: 2, prompt: 1932 },
        { at: 574, kind: 'request', node: 2, adapter: 5, tokens: 4, prompt: 112 },
        { at: 1041, kind: 'process-restart', node: 1 },
        { at: 1108, kind: 'request', node: 2, adapter: 7, tokens: 2, prompt: 1307 },
        { at: 1214, kind: 'partition', node: -1, ms: 1234 },
        { at: 2026, kind: 'partition', node: 0, ms: 2838 },
        { at: 2351, kind: 'request', node: 1, adapter: 5, tokens: 5, prompt: 972 },
        { at: 2427, kind: 'request', node: 0, adapter: 5, tokens: 4, prompt: 69 },
        { at: 2498, kind: 'process-restart', node: 0 },
        { at: 2757, kind: 'partition', node: 1, ms: 1587 },
        { at: 2866, kind: 'request', node: 1, adapter: 4, tokens: 5, prompt: 1825 },
        { at: 3760, kind: 'request', node: 2, adapter: 3, tokens: 5, prompt: 1544 },
        { at: 4093, kind: 'process-restart', node: 2 },
        { at: 4131, kind: 'slow', node: 2, ms: 1848, slowMs: 1130 },
        { at: 4290, kind: 'request', node: 2, adapter: 0, tokens: 1, prompt: 1030 },
        { at: 4869, kind: 'request', node: 2, adapter: 1, tokens: 6, prompt: 299 },
        { at: 4980, kind: 'process-restart', node: 2 },
        { at: 5355, kind: 'process-restart', node: 1 },
        { at: 5417, kind: 'request', node: 0, adapter: 4, tokens: 3, prompt: 1680 },
        { at: 5507, kind: 'request', node: 1, adapter: -1, tokens: 45, prompt: 42 },
        { at: 5549, kind: 'request', node: 2, adapter: 4, tokens: 3, prompt: 1697 },
        { at: 5929, kind: 'request', node: 2, adapter: 2, tokens: 5, prompt: 1762 },
        { at: 5992, kind: 'request', node: 1, adapter: 3, tokens: 3, prompt: 1481 },
      ],
    });
    expect(r.violation).toBeUndefined();
  }, 30_000);
  // Seed 394 (--keep 2,21,30,34): Redis restarts from its oldest snapshot (down 2.7 s), and a
  // Sentinel switch promotes a replica 330 ms in; the nodes notice the switch and take their
  // leases there. When the restart's time was up, the model put the old snapshot (a lease of
  // node 0 still open, released at 1.4 s) back as the primary's state, silently: Redis does not
  // (the old primary rejoins as the new one's replica). The model, not src/, was wrong.
  it('seed 394: a primary restarted during a Sentinel switch comes back as a replica', async () => {
    const r = await runSchedule({
      seed: 394,
      world: {
        ...WORLD,
        replicas: 2,
        maxLoadedAdapters: 4,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math'],
        loadMs: 800,
        coldLoadsPerMinute: 3,
        ttftSloMs: 0,
      },
      actions: [
        { at: 176, kind: 'request', node: 0, adapter: 3, tokens: 3, prompt: 1687 },
        { at: 3321, kind: 'request', node: 1, adapter: 3, tokens: 51, prompt: 197 },
        { at: 4605, kind: 'redis-restart', empty: false, downMs: 2661 },
        { at: 4933, kind: 'switch', lost: 2 },
      ],
    });
    expect(r.violation).toBeUndefined();
  }, 30_000);
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
  // Issue 31 item 1f, found with the fix reverted (a node cut off granted its share afresh,
  // counting only what it spent alone): seed 84 (--keep 2,3,4,16,19). Node 1 spends the whole
  // budget of 3 (chat, sql, team: three cold loads while Redis answers); every node is cut off
  // from Redis, and a request for the cold `team,a` on node 1 is granted a 4th load within the
  // minute (`n1g0 sent 4 load calls in 60 s (budget 3), the last deciding alone`). With the fix
  // its share is what is left of it: nothing.
  it('seed 84 (issue 31 item 1f): a node that spent the whole budget gets nothing more alone', async () => {
    const r = await runSchedule({
      seed: 84,
      world: {
        ...WORLD,
        maxLoadedAdapters: 2,
        adapters: ['sql', 'chat', 'team,a', 'team'],
        decodeMsPerStep: 50,
        coldLoadsPerMinute: 3,
        ttftSloMs: 0,
      },
      actions: [
        { at: 388, kind: 'request', node: 1, adapter: 1, tokens: 3, prompt: 779 },
        { at: 558, kind: 'request', node: 1, adapter: 0, tokens: 5, prompt: 1720 },
        { at: 714, kind: 'request', node: 1, adapter: 3, tokens: 1, prompt: 1178 },
        { at: 2383, kind: 'partition', node: -1, ms: 1832 },
        { at: 2814, kind: 'request', node: 1, adapter: 2, tokens: 3, prompt: 522 },
      ],
    });
    expect(r.violation).toBeUndefined();
  }, 30_000);
  // Issue 31 item 1c, found with the fix reverted (the hold counted the request's own load as
  // wait): seed 288 (--keep 5). One request for a cold adapter on an idle fleet whose loads take
  // 1.5 s against a 1 s objective was held for the whole hold window (`chat alone on an idle
  // fleet routed after 8533 ms`); now it goes at once and its load starts.
  it('seed 288 (issue 31 item 1c): a cold request alone on an idle fleet is not held', async () => {
    const r = await runSchedule({
      seed: 288,
      world: {
        ...WORLD,
        replicas: 2,
        maxLoadedAdapters: 2,
        adapters: ['sql', 'chat', 'team,a', 'team'],
        decodeMsPerStep: 50,
        staticAdapters: ['sql,chat'],
      },
      actions: [{ at: 5642, kind: 'request', node: 2, adapter: 1, tokens: 6, prompt: 1765 }],
    });
    expect(r.violation).toBeUndefined();
  }, 30_000);
  // Issue 31 item 1e, found with the fix reverted (a store that never heard from its shared state
  // counted the fleet as one node, so its share was the whole budget): seed 413 (--keep
  // 0,2,3,8,9,12,13,14,15). Every node is cut off from Redis at 172 ms and a `redis` record change
  // to other state at 985 ms gives each a new runtime that has not reached its state: each granted
  // the whole budget of 3 alone, 7 load calls within 1.5 s where the fleet's bound is 6. Now such a
  // runtime grants no cold load until its state answers.
  it('seed 413 (issue 31 item 1e): a runtime that never reached its state grants no cold load alone', async () => {
    const r = await runSchedule({
      seed: 413,
      world: {
        ...WORLD,
        replicas: 2,
        maxLoadedAdapters: 2,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math'],
        coldLoadsPerMinute: 3,
        spanMs: 2000,
        upstreamTimeoutMs: 5000,
      },
      actions: [
        { at: 75, kind: 'request', node: 0, adapter: 2, tokens: 4, prompt: 1320 },
        { at: 172, kind: 'request', node: 1, adapter: 0, tokens: 2, prompt: 579 },
        { at: 172, kind: 'partition', node: -1, ms: 2586 },
        { at: 985, kind: 'record-change', otherState: true, gapMs: 8 },
        { at: 1111, kind: 'request', node: 1, adapter: 0, tokens: 4, prompt: 1211 },
        { at: 1327, kind: 'request', node: 2, adapter: 4, tokens: 5, prompt: 1991 },
        { at: 1484, kind: 'request', node: 2, adapter: 5, tokens: 2, prompt: 1796 },
        { at: 1568, kind: 'request', node: 1, adapter: 3, tokens: 2, prompt: 1867 },
        { at: 1581, kind: 'request', node: 2, adapter: 6, tokens: 3, prompt: 652 },
      ],
    });
    expect(r.violation).toBeUndefined();
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
  // Issue 31 item 1a, found with the fix reverted (a name with a comma never read back from
  // vLLM's joined running_lora_adapters): seed 45 (--keep 0,1,2,3,4,5,6,7), the generator's
  // comma shape. Node 0, cut off from Redis with the others, sends a 109-token request for
  // `team,a`; its lease is never renewed by the replica's word, ages out, and an unload making
  // room takes `team,a` on a word that reads `team` and `a` busy, not it (`team,a unloaded with 1
  // running and 0 waiting`).
  it('seed 45 (issue 31 item 1a): a name with a comma is not unloaded under its running request', async () => {
    const r = await runSchedule({
      seed: 45,
      world: {
        ...WORLD,
        replicas: 2,
        maxLoadedAdapters: 2,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math', 'law', 'med', 'fin'],
        decodeMsPerStep: 50,
        ttftSloMs: 0,
      },
      actions: [
        { at: 290, kind: 'request', node: 1, adapter: 2, tokens: 3, prompt: 1044 },
        { at: 319, kind: 'request', node: 2, adapter: 7, tokens: 6, prompt: 1447 },
        { at: 1067, kind: 'partition', node: -1, ms: 2455 },
        { at: 1234, kind: 'request', node: 0, adapter: 2, tokens: 109, prompt: 702 },
        { at: 1287, kind: 'request', node: 0, adapter: -1, tokens: 3, prompt: 1566 },
        { at: 1693, kind: 'request', node: 0, adapter: 1, tokens: 2, prompt: 238 },
        { at: 1849, kind: 'record-change', otherState: false, gapMs: 350 },
        { at: 1933, kind: 'request', node: 2, adapter: 3, tokens: 5, prompt: 1034 },
      ],
    });
    expect(r.violation).toBeUndefined();
  }, 30_000);
  // Issue 31 item 1b's kind of break (a lease given back on another runtime's store than the one
  // that counts it), found with a planted change: LeaseHandle.release giving back on the newest
  // runtime of the node instead of where the lease was taken (the original 1b needs the old
  // hand-over, which moved leases between runtimes and is gone). Seed 6 (--keep 16,17,21): node
  // 1, cut off, takes a lease in its local store; a same-state record change comes before the
  // log phase, the release goes to the successor, and the lease stays open in the first
  // runtime's local store (`node 1: 1 lease(s) open in its local store`).
  it('seed 6 (issue 31 item 1b): a lease is given back where it was taken across a record change', async () => {
    const r = await runSchedule({
      seed: 6,
      world: {
        ...WORLD,
        replicas: 2,
        maxLoadedAdapters: 2,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math', 'law', 'med'],
        loadMs: 200,
        coldLoadsPerMinute: 3,
        ttftSloMs: 0,
      },
      actions: [
        { at: 2731, kind: 'partition', node: 1, ms: 599 },
        { at: 2738, kind: 'request', node: 1, adapter: 0, tokens: 2, prompt: 425 },
        { at: 3192, kind: 'record-change', otherState: false, gapMs: 358 },
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
  // Seed 1076 (--keep 1,2,3,4,10,12,13,27; no replica fault): five requests spend five grants of
  // a budget of 3 (three while Redis answers, two alone behind slow links), around a record change
  // to another database. Node 1's request for `chat` loads on replica-2, where `team` is busy: the
  // replica is over its limit of 1, the load is undone and the request escalates to replica-1, where
  // node 0 (alone) loads `code` at once: undone again, then loaded on replica-2 once `team` goes.
  // Seven load calls in 6.5 s where two windows allow 6; the router charges a request once however
  // often it loads (docs/reliability.md, "The cold-load budget"), and the check counted calls.
  it("seed 1076: one request's three load calls are charged once", async () => {
    const r = await runSchedule({
      seed: 1076,
      world: {
        ...WORLD,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code'],
        coldLoadsPerMinute: 3,
        ttftSloMs: 0,
      },
      actions: [
        { at: 286, kind: 'request', node: 2, adapter: 2, tokens: 22, prompt: 1915 },
        { at: 737, kind: 'request', node: 2, adapter: 3, tokens: 4, prompt: 364 },
        { at: 794, kind: 'record-change', otherState: true, gapMs: 147 },
        { at: 821, kind: 'request', node: 2, adapter: 3, tokens: 3, prompt: 1466 },
        { at: 1824, kind: 'slow', node: 0, ms: 2293, slowMs: 890 },
        { at: 2114, kind: 'request', node: 1, adapter: 1, tokens: 41, prompt: 704 },
        { at: 2144, kind: 'slow', node: 2, ms: 690, slowMs: 1048 },
        { at: 3753, kind: 'request', node: 0, adapter: 5, tokens: 27, prompt: 1524 },
      ],
    });
    expect(r.violation).toBeUndefined();
  }, 30_000);
  // Seed 102680 (--keep 17,18,19,20,23,24,26,27,28,29,32,33,34): loads on replica-1 reach it 2.6 s
  // late. Node 1 (cut off) sends `med` and `chat`, node 2 (slow links, deciding alone) `law` and
  // `team`, node 0 `team,a` and, on the new database of a record change, `code`: each view counts
  // its own loads under way, none sees the others', and the six land together, 6 for a limit of 2.
  // docs/reliability.md leaves the slot bound while nodes decide alone uncovered (loads under way at
  // once can pass it); the check's "one per node beyond the limit" was stated for loads decided
  // while no node decided alone, and now holds only for them.
  it('seed 102680: loads decided alone may land together past the limit', async () => {
    const r = await runSchedule({
      seed: 102680,
      world: {
        ...WORLD,
        replicas: 2,
        maxLoadedAdapters: 2,
        adapters: WORLD.adapters.slice(0, 11),
        loadMs: 200,
      },
      actions: [
        { at: 3400, kind: 'request', node: 2, adapter: 4, tokens: 6, prompt: 1066 },
        { at: 3419, kind: 'slow-load', replica: 1, ms: 3170, slowMs: 2603 },
        { at: 3834, kind: 'request', node: 0, adapter: 2, tokens: 2, prompt: 1651 },
        { at: 4020, kind: 'request', node: 0, adapter: 4, tokens: 2, prompt: 1132 },
        { at: 4182, kind: 'partition', node: 1, ms: 1561 },
        { at: 4212, kind: 'record-change', otherState: true, gapMs: 1405 },
        { at: 4544, kind: 'request', node: 1, adapter: 8, tokens: 2, prompt: 1372 },
        { at: 4556, kind: 'request', node: 2, adapter: 6, tokens: 6, prompt: 919 },
        { at: 4605, kind: 'slow', node: 2, ms: 2167, slowMs: 2601 },
        { at: 4754, kind: 'request', node: 2, adapter: 7, tokens: 1, prompt: 689 },
        { at: 4929, kind: 'request', node: 0, adapter: 5, tokens: 2, prompt: 482 },
        { at: 4978, kind: 'request', node: 1, adapter: 1, tokens: 1, prompt: 157 },
        { at: 5178, kind: 'request', node: 2, adapter: 3, tokens: 5, prompt: 1251 },
      ],
    });
    expect(r.violation).toBeUndefined();
  }, 30_000);
  // Seed 101305 (--keep 10,12,13,14,18,19,25,26,28,30,34,36; 101703 is the same kind): node 1, slowed,
  // decides alone and sends a request for `code` to replica-1 with no lease in Redis; node 2 trims
  // replica-1, and its fresh scrape was a `/metrics` text cut mid-line yet answered as a 200, whose
  // newest `vllm:lora_requests_info` series was gone: `code unloaded with 1 running and 0 waiting`.
  // The model's, not the router's: a body cut in transit is an error to the router's HTTP client
  // (test/core/cut-body.test.ts), a scrape that did not answer, and no unload follows one. The
  // truncated-scrape fault now resets the connection mid-body, as its own comment said it did.
  it('seed 101305: a /metrics answer cut in transit is no answer, not an idle word', async () => {
    const r = await runSchedule({
      seed: 101305,
      world: {
        ...WORLD,
        replicas: 2,
        maxLoadedAdapters: 2,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math'],
        loadMs: 800,
        decodeMsPerStep: 50,
        coldLoadsPerMinute: 6,
        ttftSloMs: 0,
      },
      actions: [
        { at: 2457, kind: 'partition', node: 0, ms: 2817 },
        { at: 3015, kind: 'request', node: 1, adapter: 6, tokens: 4, prompt: 1343 },
        { at: 3038, kind: 'switch', lost: 1 },
        { at: 3060, kind: 'request', node: 1, adapter: 4, tokens: 59, prompt: 485 },
        { at: 3640, kind: 'request', node: 2, adapter: 5, tokens: 6, prompt: 295 },
        { at: 3714, kind: 'request', node: 0, adapter: 0, tokens: 1, prompt: 888 },
        { at: 4339, kind: 'request', node: 0, adapter: 3, tokens: 24, prompt: 959 },
        { at: 4590, kind: 'scrape', replica: 1, ms: 3621, mode: 'truncated' },
        { at: 4700, kind: 'switch', lost: 1 },
        { at: 4968, kind: 'request', node: 1, adapter: -1, tokens: 4, prompt: 1218 },
        { at: 5218, kind: 'request', node: 1, adapter: 5, tokens: 3, prompt: 1300 },
        { at: 5777, kind: 'slow', node: 1, ms: 1334, slowMs: 444 },
      ],
    });
    expect(r.violation).toBeUndefined();
  }, 30_000);
  // Seed 102764 (--keep 0,2,6,9,10,19,20,21,24): node 2, cut off from Redis, sends a long request
  // for `med` to replica-1 with no lease in Redis; replica-1's `/metrics` then answers 200 with its
  // label quotes gone (the garbled fault), so no `vllm:lora_requests_info` line parses; node 1,
  // making room for `code`, read that as a replica that cannot say and unloaded `med` on the
  // lease rules alone: `med unloaded with 1 running and 0 waiting`. A text with a line no
  // Prometheus client writes is now no word to unload on (test/core/replica-clock.test.ts).
  it(
    'seed 102764: a /metrics text not written whole is no word to unload on',
    () =>
      holds(
        102764,
        {
          ...WORLD,
          replicas: 2,
          maxLoadedAdapters: 2,
          adapters: WORLD.adapters.slice(0, 10),
          loadMs: 200,
        },
        [
          { at: 210, kind: 'request', node: 0, adapter: 3, tokens: 2, prompt: 308 },
          { at: 426, kind: 'request', node: 1, adapter: 8, tokens: 1, prompt: 1016 },
          { at: 1089, kind: 'partition', node: 2, ms: 2317 },
          { at: 1192, kind: 'request', node: 0, adapter: 9, tokens: 4, prompt: 1530 },
          { at: 1280, kind: 'request', node: 2, adapter: 8, tokens: 51, prompt: 1097 },
          { at: 2610, kind: 'request', node: 1, adapter: 3, tokens: 45, prompt: 1437 },
          { at: 2615, kind: 'scrape', replica: 1, ms: 2312, mode: 'garbled' },
          { at: 2701, kind: 'request', node: 1, adapter: 6, tokens: 3, prompt: 135 },
          { at: 3424, kind: 'request', node: 1, adapter: 5, tokens: 6, prompt: 1602 },
        ],
      ),
    30_000,
  );
  // Seed 1223 (--keep 0,1,2,5,6,18; 102148 is the same kind): node 2 spends the whole budget of 3
  // on its first runtime; a record change to other state carries those spends to the new runtime's
  // store, and a Sentinel switch then degrades the old store, where a request admitted before the
  // change still decides. Alone, it counted only its own spends (carried away: none) and granted a
  // fourth load in the minute. A store now counts the spends of the stores that replaced it.
  it(
    'seed 1223: a retired store deciding alone counts what it carried to its successor',
    () =>
      holds(
        1223,
        {
          ...WORLD,
          replicas: 2,
          maxLoadedAdapters: 2,
          adapters: ['sql', 'chat', 'team,a', 'team', 'a'],
          decodeMsPerStep: 50,
          coldLoadsPerMinute: 3,
          ttftSloMs: 0,
          staticAdapters: ['sql,chat'],
        },
        [
          { at: 184, kind: 'record-change', otherState: true, gapMs: 1350 },
          { at: 335, kind: 'request', node: 2, adapter: 0, tokens: 6, prompt: 1278 },
          { at: 518, kind: 'request', node: 2, adapter: 2, tokens: 1, prompt: 1496 },
          { at: 767, kind: 'request', node: 2, adapter: 3, tokens: 2, prompt: 1613 },
          { at: 1292, kind: 'request', node: 2, adapter: 3, tokens: 6, prompt: 175 },
          { at: 2848, kind: 'switch', lost: 5 },
        ],
      ),
    30_000,
  );
  // Seed 102791 (--keep 3,4,6,7,26,27,36): node 0 spends the budget of 3, its runtime is replaced
  // on the same state, then on other state 3 ms before a partition cuts it off; the spends were to
  // be carried once the new state took the registration, which the partition failed, and the new
  // store, knowing the fleet from its first heartbeat, granted a fresh share alone. They are now
  // counted there at once.
  it(
    'seed 102791: a record change carries the spends before the new state answers',
    () =>
      holds(
        102791,
        {
          ...WORLD,
          replicas: 2,
          maxLoadedAdapters: 4,
          adapters: ['sql', 'chat', 'team,a', 'team', 'a'],
          decodeMsPerStep: 50,
          coldLoadsPerMinute: 3,
          ttftSloMs: 0,
          staticAdapters: ['sql,chat'],
        },
        [
          { at: 407, kind: 'request', node: 0, adapter: 3, tokens: 5, prompt: 1921 },
          { at: 449, kind: 'request', node: 0, adapter: 1, tokens: 4, prompt: 1017 },
          { at: 520, kind: 'request', node: 0, adapter: 4, tokens: 4, prompt: 1514 },
          { at: 760, kind: 'record-change', otherState: false, gapMs: 560 },
          { at: 3386, kind: 'record-change', otherState: true, gapMs: 921 },
          { at: 3389, kind: 'partition', node: 0, ms: 1940 },
          { at: 5694, kind: 'request', node: 0, adapter: 2, tokens: 3, prompt: 469 },
        ],
      ),
    30_000,
  );
  // Seed 102923 (all 45 actions: dropping any changes the seeded trips and the break goes): a
  // request for `chat` takes its lease at admission on node 0 (5890 ms) and waits for another
  // node's load, slowed (2.7 s late, given up at load_timeout_ms), which lands later and a poll
  // adopts; meanwhile node 1's expiry sweep reclaims the lease by age (lease_max_age_ms 4 s,
  // 10096 ms). Node 2 trims the replica's excess and unloads `chat` as the request, proxied on the
  // reclaimed lease, arrives: `chat unloaded with 0 running and 1 waiting`. An admission that
  // waited past half lease_max_age_ms now takes a fresh lease (test/core/lease-through-load.test.ts).
  it(
    'seed 102923: a request is proxied on a lease the store holds, however long it waited',
    () =>
      holds(
        102923,
        {
          ...WORLD,
          adapters: ['sql', 'chat', 'team,a', 'team', 'a'],
          decodeMsPerStep: 50,
          ttftSloMs: 0,
        },
        [
          { at: 270, kind: 'request', node: 0, adapter: 2, tokens: 4, prompt: 1927 },
          { at: 285, kind: 'request', node: 0, adapter: 2, tokens: 6, prompt: 509 },
          { at: 698, kind: 'request', node: 2, adapter: 3, tokens: 2, prompt: 522 },
          { at: 1019, kind: 'request', node: 1, adapter: 4, tokens: 1, prompt: 359 },
          { at: 1226, kind: 'request', node: 2, adapter: 2, tokens: 87, prompt: 1052 },
          { at: 1505, kind: 'request', node: 1, adapter: 1, tokens: 3, prompt: 1476 },
          { at: 1598, kind: 'request', node: 2, adapter: 3, tokens: 5, prompt: 732 },
          { at: 1703, kind: 'request', node: 2, adapter: 3, tokens: 1, prompt: 1789 },
          { at: 1718, kind: 'request', node: 2, adapter: 2, tokens: 1, prompt: 95 },
          { at: 1770, kind: 'request', node: 1, adapter: 0, tokens: 3, prompt: 1207 },
          { at: 1918, kind: 'request', node: 2, adapter: 2, tokens: 4, prompt: 1969 },
          { at: 2080, kind: 'request', node: 2, adapter: 3, tokens: 2, prompt: 1497 },
          { at: 2124, kind: 'redis-restart', empty: true, downMs: 112 },
          { at: 2204, kind: 'request', node: 1, adapter: -1, tokens: 4, prompt: 1860 },
          { at: 2240, kind: 'request', node: 0, adapter: 0, tokens: 57, prompt: 1021 },
          { at: 2314, kind: 'request', node: 0, adapter: 0, tokens: 3, prompt: 1283 },
          { at: 2316, kind: 'request', node: 2, adapter: 0, tokens: 53, prompt: 184 },
          { at: 2554, kind: 'request', node: 0, adapter: 2, tokens: 3, prompt: 880 },
          { at: 2584, kind: 'request', node: 1, adapter: 1, tokens: 1, prompt: 1134 },
          { at: 2614, kind: 'request', node: 0, adapter: 4, tokens: 3, prompt: 1885 },
          { at: 2715, kind: 'request', node: 0, adapter: 3, tokens: 35, prompt: 796 },
          { at: 2838, kind: 'request', node: 2, adapter: 1, tokens: 1, prompt: 225 },
          { at: 2866, kind: 'request', node: 1, adapter: 1, tokens: 1, prompt: 784 },
          { at: 2881, kind: 'request', node: 2, adapter: 3, tokens: 6, prompt: 1583 },
          { at: 3080, kind: 'request', node: 2, adapter: 0, tokens: 5, prompt: 1810 },
          { at: 3183, kind: 'request', node: 1, adapter: 2, tokens: 30, prompt: 825 },
          { at: 3247, kind: 'request', node: 0, adapter: 4, tokens: 2, prompt: 613 },
          { at: 3430, kind: 'request', node: 2, adapter: 4, tokens: 2, prompt: 1860 },
          { at: 3448, kind: 'request', node: 2, adapter: 3, tokens: 2, prompt: 1982 },
          { at: 3665, kind: 'request', node: 0, adapter: 0, tokens: 4, prompt: 1888 },
          { at: 3861, kind: 'request', node: 1, adapter: 0, tokens: 3, prompt: 842 },
          { at: 3878, kind: 'request', node: 1, adapter: 2, tokens: 6, prompt: 1379 },
          { at: 4075, kind: 'request', node: 0, adapter: 2, tokens: 2, prompt: 1537 },
          { at: 4329, kind: 'request', node: 2, adapter: 0, tokens: 4, prompt: 818 },
          { at: 4456, kind: 'request', node: 0, adapter: 3, tokens: 6, prompt: 886 },
          { at: 4510, kind: 'request', node: 0, adapter: 1, tokens: 1, prompt: 897 },
          { at: 4837, kind: 'request', node: 2, adapter: 3, tokens: 35, prompt: 1539 },
          { at: 4922, kind: 'request', node: 0, adapter: 3, tokens: 6, prompt: 658 },
          { at: 4994, kind: 'request', node: 2, adapter: -1, tokens: 3, prompt: 1139 },
          { at: 5081, kind: 'slow-load', replica: 2, ms: 3215, slowMs: 2709 },
          { at: 5358, kind: 'request', node: 2, adapter: 2, tokens: 53, prompt: 926 },
          { at: 5455, kind: 'request', node: 2, adapter: 0, tokens: 6, prompt: 1439 },
          { at: 5507, kind: 'request', node: 0, adapter: 0, tokens: 1, prompt: 1147 },
          { at: 5849, kind: 'request', node: 2, adapter: 2, tokens: 6, prompt: 812 },
          { at: 5882, kind: 'request', node: 1, adapter: 2, tokens: 30, prompt: 1093 },
        ],
      ),
    60_000,
  );
  // Seed 101429 (--keep 0,1,3,4,5,8; 100796, 101079 and 102325 are the same kind): node 0 decides
  // at 1463 ms to load `a` on replica-1, up then; replica-1 answers 500 on every route from 1577 ms,
  // and node 0's poll sees it down at 1950 ms. The load, under way in the engine before the fault,
  // answers 200 at 3306 ms, the after-load check's reads get 500, and the request is proxied to
  // replica-1, seen down 1.4 s before. A decision's replica is checked again once its load ends: seen
  // down meanwhile, the request is decided again (test/core/down-after-load.test.ts).
  it('seed 101429: a request whose replica was seen down during its load is decided again', async () => {
    const r = await runSchedule({
      seed: 101429,
      world: {
        ...WORLD,
        replicas: 2,
        maxLoadedAdapters: 4,
        adapters: WORLD.adapters.slice(0, 9),
        loadMs: 800,
        decodeMsPerStep: 50,
        coldLoadsPerMinute: 6,
        ttftSloMs: 0,
      },
      actions: [
        { at: 449, kind: 'request', node: 1, adapter: 2, tokens: 1, prompt: 1827 },
        { at: 893, kind: 'request', node: 1, adapter: 6, tokens: 6, prompt: 41 },
        { at: 1053, kind: 'request', node: 2, adapter: 3, tokens: 3, prompt: 1430 },
        { at: 1102, kind: 'request', node: 1, adapter: -1, tokens: 4, prompt: 1990 },
        { at: 1456, kind: 'request', node: 0, adapter: 4, tokens: 1, prompt: 465 },
        { at: 1577, kind: 'replica-outage', replica: 1, ms: 3995, mode: 'error500' },
      ],
    });
    expect(r.violation).toBeUndefined();
  }, 30_000);
  // Seed 101079 (--keep 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,24,25,28,29,30,31,32,33,34,35,36,37,38,39,
  // with the re-decision above; no shorter schedule breaks it): node 1's load of `sql` on replica-1, decided
  // at 2053 ms, lands at 4783 ms; replica-1 answers 500 since 3285 ms and is seen down, so the request is
  // decided again, on replica-0. Its claim of `sql` there comes back naming replica-1: its own placement,
  // whose release (sent, not awaited) reached the modelled Redis after the claim. It followed that
  // placement, onto replica-1 alone, and the health filter, with no replica up to keep, sent it there.
  // A placement on a replica seen down is overridden, not followed (test/core/down-after-load.test.ts).
  it('seed 101079: a request follows no placement onto a replica seen down', async () => {
    const r = await runSchedule({
      seed: 101079,
      world: {
        ...WORLD,
        maxLoadedAdapters: 2,
        adapters: WORLD.adapters.slice(0, 11),
        coldLoadsPerMinute: 6,
      },
      actions: [
        { at: 196, kind: 'request', node: 1, adapter: -1, tokens: 3, prompt: 920 },
        { at: 435, kind: 'request', node: 2, adapter: 7, tokens: 5, prompt: 1255 },
        { at: 966, kind: 'request', node: 1, adapter: 4, tokens: 4, prompt: 1135 },
        { at: 1332, kind: 'request', node: 2, adapter: 3, tokens: 5, prompt: 1853 },
        { at: 1597, kind: 'request', node: 2, adapter: 7, tokens: 3, prompt: 1743 },
        { at: 1759, kind: 'request', node: 0, adapter: 2, tokens: 4, prompt: 1930 },
        { at: 2053, kind: 'request', node: 1, adapter: 0, tokens: 2, prompt: 1713 },
        { at: 2202, kind: 'request', node: 0, adapter: 8, tokens: 6, prompt: 28 },
        { at: 2402, kind: 'skew', node: 1, ms: 35 },
        { at: 2559, kind: 'skew', node: 1, ms: 54 },
        { at: 2892, kind: 'load-fail', replica: 2, count: 1, failure: 'engine' },
        { at: 2935, kind: 'request', node: 2, adapter: 9, tokens: 2, prompt: 1982 },
        { at: 3051, kind: 'request', node: 1, adapter: 3, tokens: 4, prompt: 1273 },
        { at: 3072, kind: 'replica-restart', replica: 2, downMs: 1148 },
        { at: 3218, kind: 'request', node: 0, adapter: 6, tokens: 5, prompt: 1436 },
        { at: 3283, kind: 'request', node: 0, adapter: 10, tokens: 5, prompt: 232 },
        { at: 3285, kind: 'replica-outage', replica: 1, ms: 2977, mode: 'error500' },
        { at: 3355, kind: 'request', node: 2, adapter: 10, tokens: 1, prompt: 823 },
        { at: 3408, kind: 'skew', node: 1, ms: -79 },
        { at: 3484, kind: 'request', node: 1, adapter: -1, tokens: 5, prompt: 93 },
        { at: 3742, kind: 'request', node: 2, adapter: 2, tokens: 3, prompt: 1208 },
        { at: 3850, kind: 'process-restart', node: 2 },
        { at: 4719, kind: 'request', node: 1, adapter: 1, tokens: 3, prompt: 877 },
        { at: 4784, kind: 'request', node: 2, adapter: 6, tokens: 6, prompt: 261 },
        { at: 5131, kind: 'request', node: 0, adapter: 1, tokens: 6, prompt: 1787 },
        { at: 5211, kind: 'load-fail', replica: 2, count: 2, failure: 'rank' },
        { at: 5225, kind: 'record-change', otherState: false, gapMs: 134 },
        { at: 5239, kind: 'request', node: 0, adapter: 4, tokens: 2, prompt: 1746 },
        { at: 5417, kind: 'request', node: 2, adapter: -1, tokens: 4, prompt: 1787 },
        { at: 5435, kind: 'request', node: 1, adapter: 5, tokens: 4, prompt: 1176 },
        { at: 5458, kind: 'record-change', otherState: false, gapMs: 176 },
        { at: 5550, kind: 'request', node: 1, adapter: 1, tokens: 5, prompt: 1392 },
        { at: 5617, kind: 'request', node: 1, adapter: 0, tokens: 5, prompt: 1689 },
        { at: 5640, kind: 'request', node: 1, adapter: 0, tokens: 5, prompt: 1131 },
        { at: 5701, kind: 'request', node: 1, adapter: 8, tokens: 43, prompt: 1274 },
        { at: 5989, kind: 'request', node: 1, adapter: 7, tokens: 6, prompt: 84 },
      ],
    });
    expect(r.violation).toBeUndefined();
  }, 30_000);
  // Seed 102325 (--keep 0,1,9,31; 1046 is the same kind): replica-1 answers 500 from 218 to 3303 ms,
  // replica-0 from 962 ms; at 3689 ms node 0, whose last polls (3033 ms) saw both down, routes `a` to
  // replica-0: with no replica seen up, the health filter fails open. Replica-1 had been back 386 ms,
  // and no poll had seen it. The check's error, not the router's: "while another replica is up" now
  // means up for longer than a poll takes to see it (a poll and 0.5 s; after a hang or a timed-out
  // scrape, a poll and a timeout more), as "seen down" means down that long.
  it('seed 102325: a replica back too recently for a poll to have seen it is not yet up to the check', async () => {
    const r = await runSchedule({
      seed: 102325,
      world: { ...WORLD, replicas: 2, adapters: WORLD.adapters.slice(0, 10) },
      actions: [
        { at: 4, kind: 'request', node: 1, adapter: 4, tokens: 4, prompt: 432 },
        { at: 218, kind: 'replica-outage', replica: 1, ms: 3085, mode: 'error500' },
        { at: 962, kind: 'replica-outage', replica: 0, ms: 3900, mode: 'error500' },
        { at: 3689, kind: 'request', node: 0, adapter: 4, tokens: 3, prompt: 964 },
      ],
    });
    expect(r.violation).toBeUndefined();
  }, 30_000);
  // Seed 100526 (--keep 0,1,4,5,6,10,15,16,19,27,36): a record change to other state at 2591 ms
  // retires node 1's runtime while its request for `math` waits for room there; polling passes to
  // the successor, which polls replica-0 down once it answers 500 (from 4534 ms). The old runtime's
  // store, polled no more, still said "up", and at 6586 ms the request went to replica-0, down for
  // 2052 ms. A replaced runtime's decisions now read health from the runtime polling now.
  it('seed 100526: a decision on a replaced runtime reads health from the runtime polling now', async () => {
    const r = await runSchedule({
      seed: 100526,
      world: {
        ...WORLD,
        replicas: 2,
        adapters: WORLD.adapters.slice(0, 7),
        loadMs: 200,
        coldLoadsPerMinute: 6,
        ttftSloMs: 0,
      },
      actions: [
        { at: 280, kind: 'request', node: 0, adapter: 5, tokens: 6, prompt: 973 },
        { at: 339, kind: 'partition', node: 1, ms: 2805 },
        { at: 711, kind: 'request', node: 2, adapter: 4, tokens: 38, prompt: 1883 },
        { at: 802, kind: 'request', node: 1, adapter: 1, tokens: 5, prompt: 346 },
        { at: 1002, kind: 'partition', node: 0, ms: 1065 },
        { at: 1682, kind: 'request', node: 1, adapter: 6, tokens: 5, prompt: 1832 },
        { at: 2306, kind: 'request', node: 1, adapter: 6, tokens: 2, prompt: 227 },
        { at: 2591, kind: 'record-change', otherState: true, gapMs: 232 },
        { at: 2715, kind: 'request', node: 2, adapter: 6, tokens: 6, prompt: 100 },
        { at: 4534, kind: 'replica-outage', replica: 0, ms: 3480, mode: 'error500' },
        { at: 5255, kind: 'slow', node: 1, ms: 1821, slowMs: 426 },
      ],
    });
    expect(r.violation).toBeUndefined();
  }, 30_000);
  // Seed 1002201 (--keep 3,6,7,8,9,12,13,15): node 1 loaded `chat` on replica-0 (finishLoad at
  // 1397 ms); a Sentinel switch at 1423 ms lost the last writes, that end among them, so the new
  // primary said `chat` was loading there until the lock's TTL. Node 2's request for `chat`, alone
  // on an idle fleet from 1805 ms, waited for that load twice and got a 503 after 7,032 ms. A node
  // now sends again, once it finds the server changed, the ends of its locks that may be lost.
  it('seed 1002201: a load whose end a Sentinel switch lost is ended again on the new primary', async () => {
    await holds(
      1002201,
      {
        ...WORLD,
        adapters: WORLD.adapters.slice(0, 4),
        maxLoadedAdapters: 4,
        loadMs: 200,
        decodeMsPerStep: 50,
        coldLoadsPerMinute: 6,
        ttftSloMs: 0,
        spanMs: 2000,
        queueTimeoutMs: 4000,
        upstreamTimeoutMs: 5000,
      },
      [
        { at: 445, kind: 'request', node: 0, adapter: -1, tokens: 1, prompt: 755 },
        { at: 889, kind: 'request', node: 1, adapter: 2, tokens: 4, prompt: 756 },
        { at: 962, kind: 'request', node: 1, adapter: -1, tokens: 4, prompt: 648 },
        { at: 973, kind: 'request', node: 1, adapter: 3, tokens: 5, prompt: 1347 },
        { at: 988, kind: 'request', node: 1, adapter: 1, tokens: 2, prompt: 322 },
        { at: 1283, kind: 'request', node: 0, adapter: 0, tokens: 2, prompt: 1929 },
        { at: 1423, kind: 'switch', lost: 5 },
        { at: 1805, kind: 'request', node: 2, adapter: 1, tokens: 5, prompt: 1522 },
      ],
    );
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
  // Seed 235 (--keep 0,1,2,3,5,6,8,11), found by "the cold-load budget goes to loads" with the
  // spend moved back before the wait for room (815bea7^'s order): node 0 loads `sql` on replica-0
  // and `bio` on replica-1 (one slot each), then its process restarts at 473 ms; their leases stay
  // open until they age out. `math`, `chat` and `code` (nodes 1 and 2) wait for room; near their
  // deadline each spends the budget (6), finds every slot busy and gets 503 adapter_slots_busy.
  // Node 0's new process loads `math` (the sixth spend), and its request for `geo` at 1190 ms is
  // refused 429 at 5280 ms: a window of 6 grants, 3 of them loads. Charged only on a free slot,
  // the three 503s spend nothing and `geo` loads.
  it('seed 235: requests refused for want of a slot leave the cold-load budget to loads', async () => {
    await holds(
      235,
      {
        ...WORLD,
        replicas: 2,
        loadMs: 200,
        coldLoadsPerMinute: 6,
        ttftSloMs: 0,
        spanMs: 2000,
        staticAdapters: ['sql,chat'],
        queueTimeoutMs: 4000,
        upstreamTimeoutMs: 5000,
      },
      [
        { at: 7, kind: 'request', node: 0, adapter: 0, tokens: 27, prompt: 1849 },
        { at: 114, kind: 'request', node: 0, adapter: 10, tokens: 3, prompt: 1688 },
        { at: 156, kind: 'request', node: 2, adapter: 6, tokens: 1, prompt: 427 },
        { at: 235, kind: 'request', node: 2, adapter: 1, tokens: 3, prompt: 368 },
        { at: 431, kind: 'request', node: 1, adapter: 5, tokens: 4, prompt: 1323 },
        { at: 473, kind: 'process-restart', node: 0 },
        { at: 895, kind: 'request', node: 0, adapter: 6, tokens: 5, prompt: 1312 },
        { at: 1190, kind: 'request', node: 0, adapter: 11, tokens: 4, prompt: 514 },
      ],
    );
  }, 30_000);
  // Seed 1025140 (--keep 4,5,8,9,11,12): replica-1 answers 500 on every route from 1411 ms and
  // every node is cut off from Redis from 1540 to 2610 ms. Node 1's load of `code` there, sent at
  // 1404 ms, lands at 3876 ms; its poll at 2985 ms saw replica-1 down, but only its local store
  // heard (it still decided alone). Back on Redis, its after-load check read Redis's health, the
  // last written before the cut (up at 1040 ms), and the request went to replica-1, down 2.5 s.
  // A node back from deciding alone now hands Redis the replicas its polls found down meanwhile.
  it('seed 1025140: a replica polled down while every node decided alone reads down once Redis is back', async () => {
    await holds(
      1025140,
      {
        ...WORLD,
        replicas: 2,
        maxLoadedAdapters: 4,
        adapters: WORLD.adapters.slice(0, 9),
        ttftSloMs: 0,
        spanMs: 2000,
        queueTimeoutMs: 4000,
        upstreamTimeoutMs: 5000,
      },
      [
        { at: 841, kind: 'request', node: 2, adapter: 4, tokens: 1, prompt: 510 },
        { at: 934, kind: 'request', node: 2, adapter: 0, tokens: 6, prompt: 1496 },
        { at: 1321, kind: 'request', node: 0, adapter: 0, tokens: 3, prompt: 1020 },
        { at: 1394, kind: 'request', node: 1, adapter: 5, tokens: 6, prompt: 1705 },
        { at: 1411, kind: 'replica-outage', replica: 1, ms: 2635, mode: 'error500' },
        { at: 1540, kind: 'partition', node: -1, ms: 1070 },
      ],
    );
  }, 30_000);
  // Seed 1039269 (--keep 0,1,3,6,7,9,15), the same break through a fresh decision: a Redis
  // restart (379-772 ms, from a snapshot) leaves every node deciding alone while replica-0
  // restarts (682-2499 ms); each node polls it down into its local store only. Node 0, back on
  // Redis, read replica-0 up as last polled at 102 ms and sent its request at 1817 ms there.
  it('seed 1039269: a replica polled down during a Redis restart reads down once Redis is back', async () => {
    await holds(
      1039269,
      {
        ...WORLD,
        replicas: 2,
        adapters: WORLD.adapters.slice(0, 8),
        loadMs: 200,
        decodeMsPerStep: 50,
        ttftSloMs: 0,
        spanMs: 2000,
        queueTimeoutMs: 4000,
        upstreamTimeoutMs: 5000,
      },
      [
        { at: 99, kind: 'request', node: 2, adapter: 5, tokens: 3, prompt: 1695 },
        { at: 121, kind: 'replica-outage', replica: 0, ms: 1246, mode: 'error500' },
        { at: 379, kind: 'redis-restart', empty: false, downMs: 393 },
        { at: 682, kind: 'replica-restart', replica: 0, downMs: 1817 },
        { at: 710, kind: 'request', node: 1, adapter: 6, tokens: 4, prompt: 1467 },
        { at: 763, kind: 'request', node: 0, adapter: 7, tokens: 40, prompt: 1689 },
        { at: 1817, kind: 'request', node: 0, adapter: -1, tokens: 3, prompt: 1954 },
      ],
    );
  }, 30_000);
  // Seed 1018463 (--keep 0,1,2,3,4,5,6,7,9,10,11,12,13,15): node 1 begins loading `team,a` on
  // replica-0 (limit 1, `team` there) at 1094 ms; FLUSHALLs at 944 and 1152 ms lose its load lock.
  // Node 2 locks and loads `team,a` there too (1496 ms); vLLM answers node 1 200 and node 2
  // "already loaded" at 2394 ms, and node 2 sends its request. Node 1's after-load check finds the
  // replica over its limit and the adapter idle (asked before node 2's request came) and undoes
  // its load under it: `team,a unloaded with 0 running and 1 waiting`. An undo now needs the load's
  // lock still its own; otherwise the trim after a poll decides.
  it('seed 1018463: no after-load undo of a load whose lock a FLUSHALL lost', async () => {
    await holds(
      1018463,
      {
        ...WORLD,
        adapters: WORLD.adapters.slice(0, 5),
        loadMs: 800,
        decodeMsPerStep: 50,
        spanMs: 2000,
        staticAdapters: ['sql,chat'],
        upstreamTimeoutMs: 5000,
      },
      [
        { at: 146, kind: 'scrape', replica: 2, ms: 686, mode: 'truncated' },
        { at: 264, kind: 'load-fail', replica: 2, count: 4, failure: 'rank' },
        { at: 603, kind: 'request', node: 2, adapter: 2, tokens: 5, prompt: 941 },
        { at: 767, kind: 'request', node: 0, adapter: 3, tokens: 3, prompt: 1396 },
        { at: 815, kind: 'request', node: 1, adapter: 1, tokens: 6, prompt: 1127 },
        { at: 944, kind: 'flushall' },
        { at: 1079, kind: 'request', node: 1, adapter: 2, tokens: 1, prompt: 1174 },
        { at: 1152, kind: 'flushall' },
        { at: 1330, kind: 'request', node: 1, adapter: -1, tokens: 5, prompt: 545 },
        { at: 1430, kind: 'request', node: 2, adapter: 0, tokens: 2, prompt: 1630 },
        { at: 1452, kind: 'request', node: 1, adapter: 2, tokens: 5, prompt: 111 },
        { at: 1479, kind: 'request', node: 2, adapter: 2, tokens: 3, prompt: 618 },
        { at: 1664, kind: 'request', node: 1, adapter: 5, tokens: 4, prompt: 579 },
        { at: 1782, kind: 'request', node: 1, adapter: -1, tokens: 5, prompt: 1023 },
      ],
    );
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
  // Seed 1793 (--keep 0,1,2,3,4,5,6,7,13,14): a Sentinel switch cuts nodes 1 and 2 off (280 ms).
  // Node 0, on Redis, loads `team` on replica-1 from 708 ms; node 1, deciding alone, loads it there
  // too at 1049 ms, and is back on Redis at 1490 ms. vLLM answers node 0 200 and node 1 "already
  // loaded" (2079 ms); node 1 sends its request, and node 0's after-load check, finding the replica
  // over its limit of 1 (node 2's `a`), undoes its own load, still `loading` in Redis, on a word
  // asked before that request came: `team unloaded with 1 running and 0 waiting`. A load decided
  // alone answered "already loaded" once Redis is back looks at the shared state again first.
  it('seed 1793: a load decided alone answered "already loaded" waits for the load under way in Redis', async () => {
    await holds(
      1793,
      {
        ...WORLD,
        adapters: WORLD.adapters.slice(0, 8),
        loadMs: 800,
        decodeMsPerStep: 50,
        coldLoadsPerMinute: 6,
        ttftSloMs: 0,
        spanMs: 2000,
        queueTimeoutMs: 4000,
        upstreamTimeoutMs: 5000,
      },
      [
        { at: 280, kind: 'switch', lost: 2 },
        { at: 472, kind: 'request', node: 2, adapter: 4, tokens: 1, prompt: 975 },
        { at: 476, kind: 'request', node: 1, adapter: 1, tokens: 5, prompt: 291 },
        { at: 685, kind: 'request', node: 0, adapter: 3, tokens: 5, prompt: 1636 },
        { at: 883, kind: 'request', node: 2, adapter: 4, tokens: 2, prompt: 583 },
        { at: 1029, kind: 'request', node: 2, adapter: 5, tokens: 4, prompt: 358 },
        { at: 1049, kind: 'request', node: 1, adapter: 3, tokens: 5, prompt: 326 },
        { at: 1188, kind: 'process-restart', node: 2 },
        { at: 1919, kind: 'request', node: 0, adapter: 4, tokens: 3, prompt: 1439 },
        { at: 1954, kind: 'request', node: 1, adapter: 4, tokens: 5, prompt: 59 },
      ],
    );
  }, 30_000);
  // Seed 1026501 (all 16 actions): node 0, cut off from Redis since 426 ms, decides alone to load
  // `a` on replica-1 (1299 ms), where node 2 had loaded it; vLLM answers "already loaded" and node 0
  // sends its first request of `a` (1301.0 ms). Node 2, on Redis, making room for `code`, had read
  // the replica's word (idle) before that request came, and no lease holds `a` in Redis: it unloads
  // `a` 0.3 ms after (`a unloaded with 1 running and 0 waiting`). docs/reliability.md ("An adapter
  // someone unseen routes is held", not covered) leaves an unseen router's first request to chance:
  // the check held the router to more than the docs promise, and now exempts such a request.
  it("seed 1026501: an unseen router's first request, after the unloading node's word, is not held to (i)", async () => {
    await holds(
      1026501,
      {
        ...WORLD,
        replicas: 2,
        adapters: WORLD.adapters.slice(0, 9),
        loadMs: 200,
        coldLoadsPerMinute: 6,
        spanMs: 2000,
        upstreamTimeoutMs: 5000,
      },
      [
        { at: 54, kind: 'request', node: 0, adapter: 8, tokens: 4, prompt: 159 },
        { at: 228, kind: 'request', node: 1, adapter: 1, tokens: 3, prompt: 1776 },
        { at: 426, kind: 'partition', node: 0, ms: 1221 },
        { at: 591, kind: 'request', node: 2, adapter: 4, tokens: 2, prompt: 378 },
        { at: 840, kind: 'request', node: 0, adapter: 3, tokens: 1, prompt: 1016 },
        { at: 1269, kind: 'request', node: 2, adapter: 5, tokens: 2, prompt: 806 },
        { at: 1298, kind: 'request', node: 0, adapter: 4, tokens: 4, prompt: 403 },
        { at: 1407, kind: 'request', node: 1, adapter: 6, tokens: 2, prompt: 1194 },
        { at: 1539, kind: 'request', node: 0, adapter: -1, tokens: 5, prompt: 1840 },
        { at: 1701, kind: 'redis-restart', empty: true, downMs: 1884 },
        { at: 1767, kind: 'replica-restart', replica: 1, downMs: 203 },
        { at: 1835, kind: 'request', node: 1, adapter: 5, tokens: 6, prompt: 142 },
        { at: 1931, kind: 'skew', node: 0, ms: -123 },
        { at: 1951, kind: 'request', node: 2, adapter: 4, tokens: 3, prompt: 1305 },
        { at: 1958, kind: 'request', node: 2, adapter: 6, tokens: 3, prompt: 960 },
        { at: 1987, kind: 'request', node: 1, adapter: 8, tokens: 60, prompt: 1295 },
      ],
    );
  }, 30_000);
  // Seed 1023153 (--keep 0,1,2,3,8,9,10,14,15): a record change to another database reaches node 0
  // at 67 ms, node 1 at 723 and node 2 at 1379; node 0, first on the new state, reads one node
  // there (itself: the fleet began 67 ms before, and the others still decide on the old state) and,
  // cut off by a slow link, grants the whole budget of 3 alone. Meanwhile the old state's window
  // grants 3 (nodes 1 and 2) and the new one `a` on top of node 1's 2 carried spends: 7 load calls
  // in 1.4 s for a budget of 3, where the check allowed 6. Until the last node moves, the old and
  // the new state each keep a window (docs/reliability.md, the bound across a record change): the
  // check now allows one budget more while a record change to other state reaches the nodes, as
  // for an emptied store; it was failing on main for that reason, not a bug in src/.
  it('seed 1023153: a record change to other state allows one budget more while it reaches the nodes', async () => {
    await holds(
      1023153,
      {
        ...WORLD,
        maxLoadedAdapters: 4,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math', 'law', 'med'],
        coldLoadsPerMinute: 3,
        spanMs: 2000,
        staticAdapters: ['sql,chat'],
        upstreamTimeoutMs: 5000,
      },
      [
        { at: 67, kind: 'record-change', otherState: true, gapMs: 656 },
        { at: 299, kind: 'request', node: 1, adapter: 3, tokens: 2, prompt: 105 },
        { at: 367, kind: 'slow', node: 0, ms: 1905, slowMs: 2726 },
        { at: 399, kind: 'request', node: 1, adapter: 0, tokens: 5, prompt: 1377 },
        { at: 1063, kind: 'request', node: 1, adapter: 4, tokens: 2, prompt: 128 },
        { at: 1084, kind: 'request', node: 0, adapter: 6, tokens: 3, prompt: 451 },
        { at: 1099, kind: 'request', node: 2, adapter: 8, tokens: 5, prompt: 1157 },
        { at: 1598, kind: 'request', node: 0, adapter: 5, tokens: 3, prompt: 615 },
        { at: 1686, kind: 'request', node: 0, adapter: 1, tokens: 5, prompt: 1700 },
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
  // Seed 1012214 (--keep 0,1,2,3,4,6,7,8,9,10; the shrunk 0-10 on 579606a, whose request for `team`
  // at 1019 ms sends node 2's load elsewhere once seeds-c's fixes move the interleaving, and main's
  // lock check (its lock on the old state is its own) lets this undo through): a record change to another database reaches node 0
  // at 407 ms (node 2 only at 2493), and a FLUSHALL at 1166 ms empties both states, forgetting node
  // 1's load of `a` under way on replica-0 (limit 1). Node 2 (old state) finds its state emptied,
  // registers again and loads `sql` on replica-0 (1249 ms); node 0 (new state) does too (1279 ms).
  // vLLM loads `a`, then answers node 2 200 and node 0 "already loaded"; node 0 sends its request,
  // and node 2's after-load check, the replica over its limit, undoes `sql` under it: `sql unloaded
  // with 0 running and 1 waiting`. The server's grace after an emptied state refused beginUnload,
  // never the undo; a node that found its state emptied now holds off its unloads, the undo
  // included, for two probe intervals, as one back from an outage. Since main at 53fc9f8 (placements
  // shared by their claimers) this schedule passes with the hold-off reverted too, as do seeds
  // 1011214-1013213: test/core/emptied-hold-off.test.ts is what fails without it now.
  it('seed 1012214: no after-load undo right after the node found its state emptied', async () => {
    await holds(
      1012214,
      {
        ...WORLD,
        replicas: 2,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a'],
        loadMs: 800,
        decodeMsPerStep: 50,
        coldLoadsPerMinute: 6,
        spanMs: 2000,
        upstreamTimeoutMs: 5000,
      },
      [
        { at: 407, kind: 'record-change', otherState: true, gapMs: 1043 },
        { at: 412, kind: 'request', node: 2, adapter: 1, tokens: 2, prompt: 695 },
        { at: 576, kind: 'request', node: 1, adapter: -1, tokens: 5, prompt: 378 },
        { at: 628, kind: 'request', node: 2, adapter: -1, tokens: 4, prompt: 1966 },
        { at: 648, kind: 'request', node: 1, adapter: 4, tokens: 6, prompt: 1797 },
        { at: 1056, kind: 'request', node: 1, adapter: -1, tokens: 4, prompt: 1549 },
        { at: 1090, kind: 'request', node: 2, adapter: 0, tokens: 5, prompt: 584 },
        { at: 1166, kind: 'flushall' },
        { at: 1180, kind: 'request', node: 1, adapter: 2, tokens: 40, prompt: 1897 },
        { at: 1250, kind: 'request', node: 0, adapter: 0, tokens: 2, prompt: 1420 },
      ],
    );
  }, 30_000);

  // Seed 1065794 (--keep 0,3,5,9,10,11,12,13,14,18,19,20,21,22): node 0's first runtime (`n0g0`)
  // takes and releases lease n0g0-0 in db 0 (318-628 ms), is retired by a `redis` record change to
  // db 1 at 1,293 ms and leaves db 0 (its leases pruned, its node id gone). Redis restarts at
  // 1,540 ms from the snapshot of 500 ms, before that release: n0g0-0 is back in db 0 under a node
  // id no runtime uses any more (node 0 comes back to db 0 at 1,621 ms under a new one), renewed by
  // polls while `team,a` runs and aged out later, as a dead node's. docs/reliability.md ("A release
  // Redis acknowledged and then lost", not covered) leaves it to age; the check held it against the
  // retired runtime as if it were live (failing on main for that reason, not a bug in src/).
  it('seed 1065794: a lease a snapshot brings back under a node id that left its state is left to age', async () => {
    await holds(
      1065794,
      {
        ...WORLD,
        replicas: 2,
        maxLoadedAdapters: 4,
        adapters: WORLD.adapters.slice(0, 9),
        loadMs: 200,
        coldLoadsPerMinute: 6,
        ttftSloMs: 0,
        queueTimeoutMs: 4000,
        upstreamTimeoutMs: 5000,
      },
      [
        { at: 55, kind: 'request', node: 2, adapter: 2, tokens: 109, prompt: 318 },
        { at: 273, kind: 'partition', node: 1, ms: 1995 },
        { at: 314, kind: 'request', node: 0, adapter: 2, tokens: 2, prompt: 463 },
        { at: 1086, kind: 'request', node: 1, adapter: 0, tokens: 2, prompt: 1848 },
        { at: 1108, kind: 'request', node: 1, adapter: 2, tokens: 6, prompt: 1036 },
        { at: 1293, kind: 'record-change', otherState: true, gapMs: 221 },
        { at: 1498, kind: 'request', node: 0, adapter: 3, tokens: 3, prompt: 1426 },
        { at: 1540, kind: 'redis-restart', empty: false, downMs: 1230 },
        { at: 1621, kind: 'record-change', otherState: true, gapMs: 881 },
        { at: 4595, kind: 'request', node: 0, adapter: 4, tokens: 1, prompt: 315 },
        { at: 5260, kind: 'request', node: 0, adapter: 6, tokens: 2, prompt: 1556 },
        { at: 5271, kind: 'request', node: 0, adapter: 5, tokens: 5, prompt: 1579 },
        { at: 5577, kind: 'request', node: 0, adapter: 8, tokens: 4, prompt: 1573 },
        { at: 5661, kind: 'request', node: 0, adapter: 2, tokens: 3, prompt: 346 },
      ],
    );
  }, 30_000);
});

/** The budget seeds' world: three replicas of four slots, a budget of 3 cold loads a minute. */
const BUDGET_WORLD: Schedule['world'] = {
  ...WORLD,
  maxLoadedAdapters: 4,
  coldLoadsPerMinute: 3,
  spanMs: 2000,
  upstreamTimeoutMs: 5000,
};

describe('cold loads within the budget per window: node counts read while the state is young', () => {
  // Seven schedules, 7 load calls in one window on main at b0f2ae1 where 6 (twice the budget of 3) are
  // allowed. A node cut off grants alone the budget over the nodes it last saw; a count read less than
  // node_ttl_ms after the state began misses nodes not heard from yet. It is now only a floor over a count
  // seen before, and a process that saw none whole grants nothing alone; the modelled Redis reports the
  // epoch's age and keeps that floor as RedisFleetStore does.
  // Seed 5060 (--keep 0,1,2,3,4,5,6,7,12,14): node 0, cut off from 5 ms, had read itself alone (the first
  // heartbeat) and granted 3 alone; node 1, cut off at 1,276 ms, 1 of 3 nodes; with the shared window, 7.
  it('seed 5060', async () => {
    await holds(
      5060,
      { ...BUDGET_WORLD, adapters: WORLD.adapters.slice(0, 4), loadMs: 800, decodeMsPerStep: 100 },
      [
        { at: 5, kind: 'partition', node: 0, ms: 1765 },
        { at: 243, kind: 'request', node: 2, adapter: 3, tokens: 6, prompt: 1755 },
        { at: 1050, kind: 'request', node: 0, adapter: 1, tokens: 3, prompt: 605 },
        { at: 1128, kind: 'request', node: 2, adapter: 2, tokens: 6, prompt: 1458 },
        { at: 1166, kind: 'request', node: 0, adapter: 1, tokens: 5, prompt: 1907 },
        { at: 1276, kind: 'partition', node: 1, ms: 1154 },
        { at: 1324, kind: 'request', node: 0, adapter: 3, tokens: 5, prompt: 966 },
        { at: 1361, kind: 'request', node: 1, adapter: 2, tokens: 4, prompt: 361 },
        { at: 1888, kind: 'request', node: 2, adapter: 1, tokens: 6, prompt: 1912 },
        { at: 1931, kind: 'request', node: 0, adapter: 1, tokens: 6, prompt: 962 },
      ],
    );
  }, 30_000);
  // Seed 1063116 (--keep 2,3,4,5,6,12,13,14,15): node 1, cut off at 202 ms, had read itself alone and granted
  // 3 alone; node 2, cut off at 451 ms, had read two and granted 1.
  it('seed 1063116', async () => {
    await holds(
      1063116,
      { ...BUDGET_WORLD, adapters: WORLD.adapters.slice(0, 9), loadMs: 1500, decodeMsPerStep: 100 },
      [
        { at: 121, kind: 'request', node: 0, adapter: 8, tokens: 1, prompt: 335 },
        { at: 202, kind: 'partition', node: 1, ms: 2246 },
        { at: 242, kind: 'request', node: 1, adapter: 2, tokens: 3, prompt: 404 },
        { at: 451, kind: 'partition', node: 2, ms: 1774 },
        { at: 1015, kind: 'request', node: 1, adapter: 0, tokens: 6, prompt: 1876 },
        { at: 1672, kind: 'request', node: 0, adapter: 5, tokens: 6, prompt: 756 },
        { at: 1725, kind: 'request', node: 2, adapter: 2, tokens: 2, prompt: 536 },
        { at: 1782, kind: 'request', node: 1, adapter: 7, tokens: 2, prompt: 1500 },
        { at: 1819, kind: 'request', node: 0, adapter: 6, tokens: 5, prompt: 1405 },
      ],
    );
  }, 30_000);
  // Seed 1076049 (--keep 0,1,3,5,9,12,13,14,15): node 0, cut off at 193 ms (after a Sentinel switch at 122
  // ms), had read itself alone and granted 3 alone.
  it('seed 1076049', async () => {
    await holds(
      1076049,
      { ...BUDGET_WORLD, adapters: WORLD.adapters.slice(0, 8), loadMs: 800, decodeMsPerStep: 100 },
      [
        { at: 94, kind: 'request', node: 1, adapter: 3, tokens: 6, prompt: 695 },
        { at: 122, kind: 'switch', lost: 4 },
        { at: 193, kind: 'partition', node: 0, ms: 1888 },
        { at: 650, kind: 'request', node: 2, adapter: 2, tokens: 5, prompt: 1681 },
        { at: 774, kind: 'request', node: 0, adapter: 6, tokens: 1, prompt: 862 },
        { at: 1416, kind: 'request', node: 0, adapter: 0, tokens: 2, prompt: 1890 },
        { at: 1436, kind: 'request', node: 2, adapter: 5, tokens: 6, prompt: 569 },
        { at: 1747, kind: 'request', node: 2, adapter: 4, tokens: 4, prompt: 1327 },
        { at: 1760, kind: 'request', node: 0, adapter: 1, tokens: 2, prompt: 1297 },
      ],
    );
  }, 30_000);
  // Seed 1052030 (--keep 0,1,3,4,6,7,8,9): Redis restarted empty at 47 ms; node 2 read itself alone and
  // granted 3 alone, node 0 one more.
  it('seed 1052030', async () => {
    await holds(
      1052030,
      {
        ...BUDGET_WORLD,
        adapters: WORLD.adapters.slice(0, 12),
        maxLoadedAdapters: 2,
        loadMs: 800,
        decodeMsPerStep: 100,
      },
      [
        { at: 47, kind: 'redis-restart', empty: true, downMs: 62 },
        { at: 102, kind: 'request', node: 2, adapter: 0, tokens: 2, prompt: 1733 },
        { at: 320, kind: 'request', node: 0, adapter: 2, tokens: 2, prompt: 1349 },
        { at: 490, kind: 'request', node: 2, adapter: 11, tokens: 2, prompt: 1223 },
        { at: 909, kind: 'request', node: 1, adapter: 7, tokens: 5, prompt: 200 },
        { at: 953, kind: 'request', node: 2, adapter: 1, tokens: 2, prompt: 755 },
        { at: 983, kind: 'request', node: 1, adapter: 6, tokens: 6, prompt: 81 },
        { at: 1048, kind: 'request', node: 1, adapter: 5, tokens: 5, prompt: 98 },
      ],
    );
  }, 30_000);
  // Seed 5560 (--keep 0,1,2,3,4,5,6,7,8,10,11): Redis restarted empty at 32 ms: node 2 read itself alone (3
  // alone); node 0 read 2, then 1 from the emptied state (the model kept no floor), 3 alone too; node 1, 1.
  it('seed 5560', async () => {
    await holds(
      5560,
      {
        ...BUDGET_WORLD,
        adapters: WORLD.adapters.slice(0, 5),
        loadMs: 1500,
        decodeMsPerStep: 100,
        ttftSloMs: 0,
        queueTimeoutMs: 4000,
      },
      [
        { at: 14, kind: 'request', node: 1, adapter: 2, tokens: 2, prompt: 939 },
        { at: 32, kind: 'redis-restart', empty: true, downMs: 250 },
        { at: 48, kind: 'request', node: 2, adapter: 1, tokens: 6, prompt: 1425 },
        { at: 275, kind: 'request', node: 1, adapter: -1, tokens: 6, prompt: 1409 },
        { at: 347, kind: 'request', node: 0, adapter: 1, tokens: 1, prompt: 676 },
        { at: 347, kind: 'request', node: 1, adapter: 2, tokens: 4, prompt: 148 },
        { at: 429, kind: 'request', node: 1, adapter: 0, tokens: 4, prompt: 1640 },
        { at: 600, kind: 'request', node: 2, adapter: 2, tokens: 2, prompt: 1531 },
        { at: 615, kind: 'request', node: 2, adapter: 3, tokens: 6, prompt: 362 },
        { at: 878, kind: 'request', node: 0, adapter: 0, tokens: 2, prompt: 1654 },
        { at: 1207, kind: 'request', node: 0, adapter: 2, tokens: 5, prompt: 408 },
      ],
    );
  }, 30_000);
  // Seed 1048867 (--keep 0,1,2,3,4,6,7,9,10,11): Redis restarted empty at 877 ms, every node cut off at 1,211
  // ms: each read itself alone from the emptied state (the model kept no floor of 3) and granted 2, 1 and 2
  // alone.
  it('seed 1048867', async () => {
    await holds(
      1048867,
      { ...BUDGET_WORLD, adapters: WORLD.adapters.slice(0, 7), loadMs: 1500, decodeMsPerStep: 50 },
      [
        { at: 16, kind: 'scrape', replica: 2, ms: 472, mode: 'timeout' },
        { at: 33, kind: 'request', node: 1, adapter: 5, tokens: 4, prompt: 1618 },
        { at: 195, kind: 'request', node: 0, adapter: 2, tokens: 1, prompt: 378 },
        { at: 341, kind: 'request', node: 2, adapter: 0, tokens: 1, prompt: 283 },
        { at: 358, kind: 'request', node: 0, adapter: 3, tokens: 5, prompt: 1385 },
        { at: 745, kind: 'request', node: 2, adapter: 1, tokens: 3, prompt: 502 },
        { at: 759, kind: 'request', node: 0, adapter: 0, tokens: 2, prompt: 832 },
        { at: 877, kind: 'redis-restart', empty: true, downMs: 68 },
        { at: 1211, kind: 'partition', node: -1, ms: 699 },
        { at: 1258, kind: 'request', node: 1, adapter: 0, tokens: 4, prompt: 1961 },
      ],
    );
  }, 30_000);
  // Seed 1055440 (--keep 0,1,2,3,4,5,7,8,9,10): Redis restarted from a snapshot at 164 ms: node 1 read itself
  // alone (1 alone); node 2's count fell from 2 to 1 (the model kept no floor) and it granted 3 alone.
  it('seed 1055440', async () => {
    await holds(
      1055440,
      {
        ...BUDGET_WORLD,
        adapters: WORLD.adapters.slice(0, 11),
        replicas: 2,
        loadMs: 800,
        decodeMsPerStep: 50,
      },
      [
        { at: 164, kind: 'redis-restart', empty: false, downMs: 69 },
        { at: 269, kind: 'request', node: 2, adapter: 3, tokens: 2, prompt: 1289 },
        { at: 331, kind: 'request', node: 1, adapter: 4, tokens: 6, prompt: 1272 },
        { at: 340, kind: 'request', node: 2, adapter: 7, tokens: 1, prompt: 1441 },
        { at: 509, kind: 'request', node: 0, adapter: 7, tokens: 4, prompt: 379 },
        { at: 597, kind: 'request', node: 0, adapter: 5, tokens: 2, prompt: 617 },
        { at: 977, kind: 'slow', node: 2, ms: 543, slowMs: 2204 },
        { at: 1153, kind: 'request', node: 0, adapter: 2, tokens: 3, prompt: 999 },
        { at: 1289, kind: 'request', node: 2, adapter: 1, tokens: 6, prompt: 380 },
        { at: 1498, kind: 'request', node: 2, adapter: 5, tokens: 4, prompt: 1025 },
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
  // Issue 31 item 1a on the generator drawing node_ttl_ms (seed 45 above breaks with the fix reverted
  // only at node_ttl_ms 500: at the default 2 s no node cut off has read a whole node count, so none
  // loads alone). Seed 10 (--keep 2,3,4,9,10,14), no partition: node 2's 89-token request on
  // `team,a` (100 ms a token) outlives lease_max_age_ms on one-slot replicas; its lease, never renewed
  // by a word that reads only `team` and `a`, ages out, and an unload making room takes `team,a`
  // under it (`team,a unloaded with 1 running and 0 waiting`).
  it('seed 10 (issue 31 item 1a): a name with a comma is read running from the joined list', async () => {
    await holds(
      10,
      {
        ...WORLD,
        adapters: WORLD.adapters.slice(0, 6),
        spanMs: 6000,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 2000,
      },
      [
        { at: 183, kind: 'request', node: 2, adapter: 2, tokens: 89, prompt: 1010 },
        { at: 244, kind: 'request', node: 1, adapter: 5, tokens: 1, prompt: 1133 },
        { at: 368, kind: 'request', node: 1, adapter: 1, tokens: 4, prompt: 706 },
        { at: 1229, kind: 'request', node: 0, adapter: 0, tokens: 5, prompt: 1618 },
        { at: 1253, kind: 'switch', lost: 0 },
        { at: 1722, kind: 'request', node: 0, adapter: 3, tokens: 58, prompt: 1287 },
      ],
    );
  }, 30_000);
  // Issue 31 item 1d (a wait ended by its fallback left its wake-up behind), found with the fix
  // reverted: seed 12 (--keep 6,7,10,11,12,15). Node 2's requests wait for room on one-slot
  // replicas (a slow load, Redis restarted empty for 69 ms), each fallback leaving a wake-up in the
  // room signal (`node 2: 12 wake-ups left with 3 requests routing`).
  it('seed 12 (issue 31 item 1d): a wait ended by its fallback leaves no wake-up behind', async () => {
    await holds(
      12,
      {
        ...WORLD,
        replicas: 2,
        adapters: WORLD.adapters.slice(0, 8),
        loadMs: 800,
        coldLoadsPerMinute: 6,
        spanMs: 2000,
        staticAdapters: ['sql,chat'],
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 500,
      },
      [
        { at: 988, kind: 'request', node: 2, adapter: 1, tokens: 2, prompt: 1679 },
        { at: 1299, kind: 'slow-load', replica: 1, ms: 1437, slowMs: 3978 },
        { at: 1462, kind: 'redis-restart', empty: true, downMs: 69 },
        { at: 1481, kind: 'request', node: 2, adapter: 3, tokens: 4, prompt: 404 },
        { at: 1639, kind: 'request', node: 2, adapter: 5, tokens: 4, prompt: 145 },
        { at: 1970, kind: 'request', node: 2, adapter: 0, tokens: 1, prompt: 147 },
      ],
    );
  }, 30_000);
  // Issue 31 item 1e on the current code (seed 413 above no longer breaks with the fix reverted: its
  // nodes still send 6 load calls alone, but the check now allows one budget more for the record
  // change to other state under way). Seed 3 (--keep 0,2,4,5,6,7,10,11): a Sentinel switch at 605
  // ms, the state younger than node_ttl_ms (2 s), so no node has read a whole node count; the nodes
  // deciding alone after it took the fleet for one node and granted the whole budget of 3 each
  // (`7 loads within 1363 ms (allowed 6)`). Such a node grants nothing alone.
  it('seed 3 (issue 31 item 1e): a node that never read a whole node count grants no cold load alone', async () => {
    await holds(
      3,
      {
        ...WORLD,
        replicas: 2,
        maxLoadedAdapters: 2,
        adapters: WORLD.adapters.slice(0, 8),
        loadMs: 800,
        decodeMsPerStep: 50,
        coldLoadsPerMinute: 3,
        spanMs: 2000,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 2000,
      },
      [
        { at: 7, kind: 'request', node: 1, adapter: 1, tokens: 2, prompt: 749 },
        { at: 200, kind: 'request', node: 1, adapter: 4, tokens: 1, prompt: 949 },
        { at: 605, kind: 'switch', lost: 0 },
        { at: 626, kind: 'request', node: 2, adapter: 5, tokens: 5, prompt: 1507 },
        { at: 671, kind: 'request', node: 0, adapter: 4, tokens: 2, prompt: 971 },
        { at: 711, kind: 'request', node: 2, adapter: 4, tokens: 5, prompt: 1724 },
        { at: 1145, kind: 'request', node: 2, adapter: 6, tokens: 2, prompt: 519 },
        { at: 1280, kind: 'request', node: 1, adapter: 7, tokens: 3, prompt: 1776 },
      ],
    );
  }, 30_000);
  // Seed 16974 (--keep 0,1,8,14,15): a `redis` record change to other state pushed to the nodes 1,189 ms
  // apart (node 2 at 2,412 ms); Redis restarted from its snapshot at 1,750 ms. Node 2's request for `sql` came
  // at 1,811 ms, before its push, and waited on its old runtime for room on replica-0 (`team` idle there):
  // refused while node 2 decided alone, then, the runtime retired to other state, by the runtime itself
  // (its successor may admit a request at once) while the successor unloads nothing until that decision
  // ends. A 503 after 8 s. The hold's check took it for a request with nothing that could change.
  it('seed 16974: a request that came before its node took a record change is no idle hold', async () => {
    await holds(
      16974,
      {
        ...WORLD,
        adapters: WORLD.adapters.slice(0, 4),
        loadMs: 200,
        decodeMsPerStep: 50,
        coldLoadsPerMinute: 3,
        spanMs: 2000,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 2000,
      },
      [
        { at: 34, kind: 'record-change', otherState: true, gapMs: 1189 },
        { at: 411, kind: 'request', node: 0, adapter: 1, tokens: 6, prompt: 1126 },
        { at: 1055, kind: 'request', node: 0, adapter: 3, tokens: 4, prompt: 481 },
        { at: 1750, kind: 'redis-restart', empty: false, downMs: 5 },
        { at: 1811, kind: 'request', node: 2, adapter: 0, tokens: 4, prompt: 374 },
      ],
    );
  }, 30_000);
  // Seed 13185 (--keep 0,1,2,3,4,5,7,8,9,13,15): a `redis` record change to other state reaches node 0 at
  // 361 ms, node 1 at 1,347 ms. Node 1's request for `team,a`, decided on the old state at 897 ms, and
  // node 0's, decided on the new one at 1,046 ms, each load it on replica-1 beside `a` and `code`: node 1's
  // lands "loaded", node 0's "already loaded", and node 0 proxies its request at 2,739 ms. Node 1's retired
  // runtime, its after-load check reading the replica over its limit of 2 with `team,a` idle, undid its
  // load at 2,740 ms under node 0's request (`unloaded with 0 running and 1 waiting`): a replaced runtime on
  // other state cannot see the requests of the state the node moved to, and now keeps the excess.
  it('seed 13185: a runtime replaced for other state does not undo its load under the new state', async () => {
    await holds(
      13185,
      {
        ...WORLD,
        replicas: 2,
        maxLoadedAdapters: 2,
        adapters: WORLD.adapters.slice(0, 8),
        loadMs: 800,
        decodeMsPerStep: 50,
        coldLoadsPerMinute: 3,
        ttftSloMs: 0,
        spanMs: 2000,
        queueTimeoutMs: 4000,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 500,
      },
      [
        { at: 131, kind: 'request', node: 2, adapter: 1, tokens: 4, prompt: 208 },
        { at: 141, kind: 'request', node: 0, adapter: -1, tokens: 2, prompt: 1418 },
        { at: 325, kind: 'request', node: 2, adapter: 4, tokens: 3, prompt: 292 },
        { at: 361, kind: 'record-change', otherState: true, gapMs: 986 },
        { at: 487, kind: 'request', node: 0, adapter: 5, tokens: 1, prompt: 1109 },
        { at: 788, kind: 'request', node: 0, adapter: 6, tokens: 1, prompt: 77 },
        { at: 897, kind: 'request', node: 1, adapter: 2, tokens: 1, prompt: 972 },
        { at: 1046, kind: 'request', node: 0, adapter: 2, tokens: 1, prompt: 215 },
        { at: 1167, kind: 'request', node: 0, adapter: 6, tokens: 1, prompt: 75 },
        { at: 1831, kind: 'request', node: 0, adapter: 2, tokens: 4, prompt: 1510 },
        { at: 1965, kind: 'request', node: 2, adapter: 0, tokens: 3, prompt: 1754 },
      ],
    );
  }, 30_000);
});

describe('cold loads within the budget per window: nodes cut off one after another', () => {
  // Seed 228 (--keep 3,4,5,6,7,8,9,10,19,20,21,22,23,24,25,26,27,28,29,30,31,32,33,34,35,42,43,44,45,46,47), the
  // staggered cut-offs' shape, found with e6d3f0b's hold reverted: the budget of 6 spent in the shared
  // window (node 2 four, nodes 0 and 1 one each); node 2 cut off at 893 ms; node 0 cut off at 2,608 ms, once
  // node 2 was swept, read 2 nodes and granted 3 less the 1 it spent, 2 alone; node 1 cut off at 4,319 ms,
  // once node 0 was swept, read 1 and granted 6 less its 1, 5 alone: 13 loads in one window, over twice the
  // budget. A count that went down is now held for the window: 6 + 1 + 1.
  it('seed 228: a node cut off after the others were swept grants no larger share', async () => {
    await holds(
      228,
      {
        ...WORLD,
        replicas: 2,
        maxLoadedAdapters: 4,
        adapters: WORLD.adapters.slice(0, 9),
        coldLoadsPerMinute: 6,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 500,
      },
      [
        { at: 15, kind: 'request', node: 2, adapter: 3, tokens: 6, prompt: 1841 },
        { at: 17, kind: 'request', node: 2, adapter: 7, tokens: 6, prompt: 327 },
        { at: 20, kind: 'request', node: 2, adapter: 0, tokens: 5, prompt: 109 },
        { at: 309, kind: 'request', node: 0, adapter: 0, tokens: 4, prompt: 1382 },
        { at: 428, kind: 'request', node: 0, adapter: 3, tokens: 5, prompt: 1262 },
        { at: 489, kind: 'request', node: 2, adapter: 1, tokens: 3, prompt: 1379 },
        { at: 723, kind: 'request', node: 0, adapter: 3, tokens: 6, prompt: 1450 },
        { at: 893, kind: 'partition', node: 2, ms: 4512 },
        { at: 1614, kind: 'request', node: 2, adapter: 3, tokens: 4, prompt: 933 },
        { at: 1716, kind: 'replica-restart', replica: 0, downMs: 461 },
        { at: 1718, kind: 'load-fail', replica: 1, count: 1, failure: 'engine' },
        { at: 1770, kind: 'request', node: 1, adapter: 2, tokens: 5, prompt: 903 },
        { at: 1908, kind: 'request', node: 0, adapter: -1, tokens: 2, prompt: 1716 },
        { at: 2608, kind: 'partition', node: 0, ms: 2797 },
        { at: 2736, kind: 'request', node: 0, adapter: 6, tokens: 2, prompt: 1106 },
        { at: 2841, kind: 'request', node: 0, adapter: 5, tokens: 3, prompt: 1472 },
        { at: 2845, kind: 'request', node: 0, adapter: 8, tokens: 5, prompt: 1080 },
        { at: 2858, kind: 'request', node: 0, adapter: 4, tokens: 5, prompt: 639 },
        { at: 2906, kind: 'request', node: 0, adapter: 7, tokens: 1, prompt: 1306 },
        { at: 2980, kind: 'request', node: 0, adapter: 3, tokens: 5, prompt: 1745 },
        { at: 3094, kind: 'request', node: 0, adapter: 1, tokens: 3, prompt: 1496 },
        { at: 3188, kind: 'request', node: 0, adapter: 0, tokens: 6, prompt: 1232 },
        { at: 4319, kind: 'partition', node: 1, ms: 1086 },
        { at: 4449, kind: 'request', node: 1, adapter: 5, tokens: 3, prompt: 503 },
        { at: 4516, kind: 'request', node: 1, adapter: 6, tokens: 1, prompt: 1988 },
        { at: 4806, kind: 'request', node: 1, adapter: 7, tokens: 3, prompt: 321 },
        { at: 5128, kind: 'request', node: 0, adapter: 8, tokens: 3, prompt: 1984 },
        { at: 5136, kind: 'request', node: 1, adapter: 6, tokens: 6, prompt: 395 },
        { at: 5179, kind: 'request', node: 1, adapter: 2, tokens: 1, prompt: 74 },
        { at: 5205, kind: 'request', node: 1, adapter: 1, tokens: 4, prompt: 176 },
        { at: 5316, kind: 'request', node: 2, adapter: 2, tokens: 6, prompt: 619 },
      ],
    );
  }, 30_000);
});

describe('no unload of a busy adapter: a peer on other state during a record change', () => {
  // Seed 37593 (all 16 actions; none can be dropped): a `redis` record change to other state reaches
  // node 0 at 1,838 ms, node 1 and node 2 only after 2,036 ms. Node 2, still on the old state, makes
  // room for `sql` on replica-0 (limit 1): it locks `chat` there (no lease of it in the old state),
  // asks the replica's word at 1,925 ms (idle), and unloads it at 1,927 ms; node 0's request for `chat`,
  // decided on the new state from its own poll, reached the engine at 1,926 ms, between the two. No
  // node can see it: its lease is in a state node 2 does not read, and the word was written before it
  // came (docs/reliability.md, "An adapter someone unseen routes is held", not covered). The check
  // exempted only routers deciding alone; it now exempts a peer's first request on other state too.
  it('seed 37593: an unload on the old state under a peer request routed on the new one is the window left open', async () => {
    await holds(
      37593,
      {
        nodes: 3,
        replicas: 2,
        maxLoadedAdapters: 1,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math', 'law', 'med', 'fin', 'bio'],
        loadMs: 800,
        decodeMsPerStep: 100,
        coldLoadsPerMinute: 3,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 1000,
        spanMs: 2000,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 2000,
      },
      [
        { at: 38, kind: 'request', node: 2, adapter: 10, tokens: 2, prompt: 274 },
        { at: 134, kind: 'request', node: 0, adapter: 2, tokens: 3, prompt: 307 },
        { at: 138, kind: 'request', node: 2, adapter: 1, tokens: 1, prompt: 1728 },
        { at: 215, kind: 'request', node: 0, adapter: 1, tokens: 2, prompt: 1125 },
        { at: 583, kind: 'request', node: 2, adapter: 3, tokens: 2, prompt: 839 },
        { at: 666, kind: 'request', node: 2, adapter: 1, tokens: 5, prompt: 1691 },
        { at: 990, kind: 'request', node: 1, adapter: 1, tokens: 6, prompt: 721 },
        { at: 1138, kind: 'record-change', otherState: false, gapMs: 189 },
        { at: 1158, kind: 'request', node: 0, adapter: 6, tokens: 35, prompt: 976 },
        { at: 1382, kind: 'request', node: 1, adapter: 10, tokens: 5, prompt: 35 },
        { at: 1672, kind: 'request', node: 1, adapter: 0, tokens: 6, prompt: 1963 },
        { at: 1695, kind: 'request', node: 0, adapter: 6, tokens: 5, prompt: 1085 },
        { at: 1838, kind: 'record-change', otherState: true, gapMs: 198 },
        { at: 1916, kind: 'request', node: 0, adapter: 1, tokens: 6, prompt: 854 },
        { at: 1920, kind: 'request', node: 2, adapter: 7, tokens: 2, prompt: 253 },
        { at: 1922, kind: 'request', node: 2, adapter: 0, tokens: 1, prompt: 1609 },
      ],
    );
  }, 30_000);
  // Seed 37497 (--keep 0,1,2,3,4,5,8,9,10,13,14,21): a `redis` record change to other state reaches node 0 at
  // 469 ms, node 2 at 1,857 ms. Node 0's new runtime, holding off its unloads, loads `team` on replica-1 at
  // 733 ms; node 2, still on the old state, loads it there too at 1,710 ms. vLLM runs the loads one by one:
  // node 0's lands at 2,869 ms, once its hold-off (2 s after its change) is over, and its after-load check,
  // reading the replica over its limit of 2 at once, undid it; node 2's, answered "already loaded", had
  // sent its request (`team unloaded with 0 running and 1 waiting`). A load decided while unloads are held
  // off is not undone even if it lands after.
  it('seed 37497: a load decided during the unload hold-off is not undone when it lands after it', async () => {
    await holds(
      37497,
      {
        ...WORLD,
        replicas: 2,
        maxLoadedAdapters: 2,
        adapters: WORLD.adapters.slice(0, 6),
        loadMs: 800,
        coldLoadsPerMinute: 6,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 500,
      },
      [
        { at: 307, kind: 'request', node: 2, adapter: 0, tokens: 2, prompt: 197 },
        { at: 446, kind: 'request', node: 1, adapter: 1, tokens: 2, prompt: 1271 },
        { at: 469, kind: 'record-change', otherState: true, gapMs: 694 },
        { at: 580, kind: 'request', node: 0, adapter: 1, tokens: 4, prompt: 462 },
        { at: 712, kind: 'request', node: 0, adapter: 0, tokens: 2, prompt: 996 },
        { at: 720, kind: 'request', node: 0, adapter: 3, tokens: 4, prompt: 201 },
        { at: 1039, kind: 'request', node: 2, adapter: 1, tokens: 6, prompt: 698 },
        { at: 1071, kind: 'request', node: 0, adapter: -1, tokens: 4, prompt: 1547 },
        { at: 1215, kind: 'request', node: 2, adapter: 2, tokens: 1, prompt: 179 },
        { at: 1541, kind: 'request', node: 0, adapter: 4, tokens: 1, prompt: 735 },
        { at: 1698, kind: 'request', node: 2, adapter: 3, tokens: 6, prompt: 348 },
        { at: 5866, kind: 'request', node: 0, adapter: 5, tokens: 3, prompt: 1391 },
      ],
    );
  }, 30_000);
  // Seed 179824 (--keep 0,4,5,7,8,10,11,12; budget 3): Sentinel switches at 179 ms and 834 ms, each
  // losing the writes since the first registration. Redis grants node 1 a spend at 712 ms, loses it
  // in the second switch, and grants three more (1,060, 1,107, 1,304 ms): four in one window, the
  // fleet's bound allowing one budget more per switch that loses writes. The fourth request's link
  // turns slow at 1,304 ms, just after its grant came back, and its load call goes out at 1,809 ms
  // while node 1 decides alone. The node granted nothing alone (its own record held all four, so its
  // share was spent); the check took the call for a grant of the share (failing on main for that
  // reason, not a bug in src/). It now holds only loads granted alone to the share.
  it('seed 179824: a load Redis granted, sent once the node decides alone, is no grant of its share', async () => {
    await holds(
      179824,
      {
        ...WORLD,
        maxLoadedAdapters: 4,
        adapters: WORLD.adapters.slice(0, 10),
        loadMs: 800,
        coldLoadsPerMinute: 3,
        spanMs: 2000,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 2000,
      },
      [
        { at: 179, kind: 'switch', lost: 4 },
        { at: 696, kind: 'request', node: 1, adapter: 7, tokens: 3, prompt: 1138 },
        { at: 834, kind: 'switch', lost: 6 },
        { at: 1051, kind: 'request', node: 1, adapter: 2, tokens: 6, prompt: 1850 },
        { at: 1093, kind: 'request', node: 1, adapter: 6, tokens: 4, prompt: 336 },
        { at: 1282, kind: 'request', node: 2, adapter: 6, tokens: 2, prompt: 1641 },
        { at: 1290, kind: 'request', node: 1, adapter: 0, tokens: 4, prompt: 1088 },
        { at: 1304, kind: 'slow', node: 1, ms: 494, slowMs: 1128 },
      ],
    );
  }, 30_000);
});

describe('a failed load is not tried again within the backoff: on the clock the router measures it', () => {
  // Seed 134920 (--keep 0,3,10,14,15): node 0's clock is 279 ms behind from 238 ms; replica-0 fails the
  // next four loads (vLLM's 404). Node 0's load of `team` fails there at 1,288 ms; at 1,700 ms its clock
  // steps to 247 ms ahead, and it loads `team` there again at 2,011 ms: 723 ms later in true time, 1,249 ms
  // on its own clock, past backoff_base_ms (1 s). The router measures the backoff on its clock (a real
  // node's is monotonic within a process: SystemClock); the check measured true time and now measures the
  // sender's clock.
  it("seed 134920: a failed load's backoff is measured on its node's clock, stepped ahead by a skew", async () => {
    await holds(
      134920,
      {
        ...WORLD,
        replicas: 2,
        maxLoadedAdapters: 4,
        adapters: WORLD.adapters.slice(0, 5),
        decodeMsPerStep: 50,
        coldLoadsPerMinute: 6,
        spanMs: 2000,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 2000,
      },
      [
        { at: 238, kind: 'skew', node: 0, ms: -279 },
        { at: 758, kind: 'load-fail', replica: 0, count: 4, failure: 'not-found' },
        { at: 1272, kind: 'request', node: 0, adapter: 3, tokens: 6, prompt: 1205 },
        { at: 1700, kind: 'skew', node: 0, ms: 247 },
        { at: 1992, kind: 'request', node: 0, adapter: 3, tokens: 4, prompt: 980 },
      ],
    );
  }, 30_000);
});

describe('a failed load is not tried again within the backoff: from when the router heard the failure', () => {
  // Seed 116306 (--keep 0,1,2,3,4,5,6,7,8,12,13,14,18,19,20,27,28,29,30,31,32,33,34,35,36,37,38,39,40,41,42,43,44,45,46,47;
  // drawn with the overload shapes; `--no-overload` draws another schedule): replica-0 fails its next two
  // loads (engine) from 389 ms. Node 0's load of `sql` there fails at 1,684 ms; node 0's clock steps 161 ms
  // back at 1,685 ms, before the answer's trip back: the router hears it at 1,686 ms, 1,525 on its clock,
  // and backs off until 2,525. It loads `sql` there again at 2,690 ms, 2,529 on its clock: 1,004 ms after it
  // heard, 845 after the answer on the clock before the step (1,006 ms of true time). The check stamped the
  // failure on the sender's clock when the replica answered; it now stamps it when the sender heard it.
  it("seed 116306: a failed load's backoff starts when its sender hears it, a clock step back between", async () => {
    await holds(
      116306,
      {
        nodes: 3,
        replicas: 2,
        maxLoadedAdapters: 2,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math', 'law', 'med', 'fin', 'bio'],
        loadMs: 800,
        decodeMsPerStep: 100,
        coldLoadsPerMinute: 1000,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 1000,
        spanMs: 4348,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 500,
        queueTimeoutMs: 2000,
        maxNumSeqs: 4,
      },
      [
        { at: 48, kind: 'request', node: 0, adapter: 0, tokens: 55, prompt: 1655 },
        { at: 51, kind: 'request', node: 0, adapter: 4, tokens: 37, prompt: 1737 },
        { at: 53, kind: 'request', node: 0, adapter: 6, tokens: 53, prompt: 1087 },
        { at: 181, kind: 'request', node: 1, adapter: -1, tokens: 4, prompt: 1832 },
        { at: 302, kind: 'request', node: 0, adapter: -1, tokens: 29, prompt: 1051 },
        { at: 340, kind: 'request', node: 0, adapter: -1, tokens: 2, prompt: 1559 },
        { at: 343, kind: 'request', node: 0, adapter: 0, tokens: 43, prompt: 1360 },
        { at: 389, kind: 'load-fail', replica: 0, count: 2, failure: 'engine' },
        { at: 515, kind: 'request', node: 0, adapter: -1, tokens: 29, prompt: 1148 },
        { at: 701, kind: 'request', node: 0, adapter: 4, tokens: 41, prompt: 1567 },
        { at: 767, kind: 'request', node: 1, adapter: 4, tokens: 1, prompt: 870 },
        { at: 833, kind: 'redis-restart', empty: true, downMs: 2126 },
        { at: 1227, kind: 'request', node: 0, adapter: 6, tokens: 54, prompt: 1702 },
        { at: 1374, kind: 'request', node: 0, adapter: 0, tokens: 42, prompt: 1178 },
        { at: 1412, kind: 'request', node: 1, adapter: -1, tokens: 3, prompt: 464 },
        { at: 1637, kind: 'record-change', otherState: false, gapMs: 1193 },
        { at: 1650, kind: 'request', node: 2, adapter: 9, tokens: 1, prompt: 1965 },
        { at: 1650, kind: 'request', node: 0, adapter: 4, tokens: 39, prompt: 1775 },
        { at: 1685, kind: 'skew', node: 0, ms: -161 },
        { at: 2132, kind: 'request', node: 0, adapter: -1, tokens: 45, prompt: 1165 },
        { at: 2139, kind: 'request', node: 0, adapter: 6, tokens: 34, prompt: 1678 },
        { at: 2252, kind: 'request', node: 0, adapter: -1, tokens: 27, prompt: 1147 },
        { at: 2342, kind: 'request', node: 0, adapter: 6, tokens: 35, prompt: 1957 },
        { at: 2362, kind: 'request', node: 0, adapter: 6, tokens: 49, prompt: 1007 },
        { at: 2371, kind: 'request', node: 0, adapter: -1, tokens: 38, prompt: 1197 },
        { at: 2428, kind: 'request', node: 0, adapter: -1, tokens: 35, prompt: 1066 },
        { at: 2477, kind: 'request', node: 0, adapter: 0, tokens: 26, prompt: 1933 },
        { at: 2498, kind: 'request', node: 0, adapter: 4, tokens: 26, prompt: 1250 },
        { at: 2816, kind: 'request', node: 0, adapter: 0, tokens: 37, prompt: 1800 },
        { at: 2879, kind: 'request', node: 0, adapter: -1, tokens: 55, prompt: 1822 },
        { at: 3404, kind: 'request', node: 0, adapter: 6, tokens: 46, prompt: 1278 },
        { at: 4071, kind: 'request', node: 0, adapter: 4, tokens: 52, prompt: 1060 },
        { at: 4212, kind: 'request', node: 0, adapter: 4, tokens: 57, prompt: 1602 },
        { at: 4268, kind: 'request', node: 0, adapter: -1, tokens: 28, prompt: 1715 },
        { at: 4324, kind: 'request', node: 0, adapter: 6, tokens: 21, prompt: 1583 },
        { at: 4327, kind: 'request', node: 0, adapter: 6, tokens: 59, prompt: 1472 },
      ],
    );
  }, 30_000);
});

describe('no unload of a busy adapter: a FLUSHALL, then a record change on the same state', () => {
  // Seed 150271 (16 actions, none can be dropped): a FLUSHALL at 1,828 ms, then a `redis` record change on the
  // same state reaches node 0 at 1,933 ms, whose new runtime registers the replicas first. The simulated
  // Redis counted epoch candidates per link (`n0g0.0`), so it set the very epoch node 0's first runtime had
  // set at the start: no node that knew the old state learned it was emptied. Node 0's old runtime never
  // took again the lease of its request for `sql` waiting for room since 573 ms, node 2 never held off, and
  // its eviction unloaded `sql` on replica-1 at 2,396 ms as that request went there (`sql unloaded with 1
  // running and 0 waiting`). The model's, not the router's: the script's epochs are 64 random bits.
  it("seed 150271: a same-state successor's registration after a FLUSHALL sets an epoch nobody saw", async () => {
    await holds(
      150271,
      {
        ...WORLD,
        replicas: 2,
        maxLoadedAdapters: 1,
        adapters: WORLD.adapters.slice(0, 6),
        loadMs: 200,
        decodeMsPerStep: 50,
        spanMs: 2000,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 2000,
      },
      [
        { at: 66, kind: 'request', node: 1, adapter: -1, tokens: 5, prompt: 1037 },
        { at: 204, kind: 'request', node: 2, adapter: 5, tokens: 1, prompt: 850 },
        { at: 447, kind: 'request', node: 0, adapter: 1, tokens: 2, prompt: 867 },
        { at: 573, kind: 'request', node: 0, adapter: 0, tokens: 1, prompt: 798 },
        { at: 590, kind: 'request', node: 2, adapter: 1, tokens: 4, prompt: 1638 },
        { at: 698, kind: 'load-fail', replica: 0, count: 2, failure: 'rank' },
        { at: 854, kind: 'request', node: 1, adapter: -1, tokens: 4, prompt: 102 },
        { at: 990, kind: 'request', node: 1, adapter: 4, tokens: 6, prompt: 410 },
        { at: 1227, kind: 'request', node: 0, adapter: 5, tokens: 1, prompt: 1120 },
        { at: 1347, kind: 'request', node: 2, adapter: 4, tokens: 6, prompt: 1127 },
        { at: 1548, kind: 'request', node: 1, adapter: 4, tokens: 1, prompt: 1164 },
        { at: 1710, kind: 'request', node: 2, adapter: 1, tokens: 2, prompt: 46 },
        { at: 1823, kind: 'request', node: 2, adapter: -1, tokens: 1, prompt: 1345 },
        { at: 1828, kind: 'flushall' },
        { at: 1933, kind: 'record-change', otherState: false, gapMs: 1156 },
        { at: 1952, kind: 'request', node: 0, adapter: 5, tokens: 4, prompt: 1071 },
      ],
    );
  }, 30_000);
});

describe('no unload of a busy adapter: a request whose client gave up on its way reaches the engine after its 499', () => {
  // Seed 2426103 (27 of 30 actions, none more can be dropped): node 0 proxies `fin` to replica-1 at
  // 1,533 ms over a slow path (2,779 ms each way: it reaches the replica at 4,312 ms). Its client
  // gives up at 3,712 ms: Kong logs 499, closes the upstream connection and runs the log phase, which
  // gives its lease back (the last the plugin hears of it). Node 2's `fin` request runs there
  // 3,745-4,296 ms. Node 1 makes room for `team,a`: granted the unload at 4,305 ms (no lease of `fin`
  // open), its word asked at 4,307 ms reads `fin` idle, the unload goes out at 4,310 ms and lands at
  // 4,312 ms just after node 0's request reached the engine, ahead of its close (due at 6,491 ms): `fin
  // unloaded with 0 running and 1 waiting`. The check's, not the router's: the same request on its way
  // was already excused ("Kong closed it"); no lease (its log phase gave it back) nor word (it came
  // after) could show it, and it has no client. Now it counts as an unseen router's first
  // (dst/unseen-check.ts).
  it("seed 2426103: a 499's request, closed on its way, reaches the engine after the unloader's word", async () => {
    await holds(
      2426103,
      {
        nodes: 3,
        replicas: 2,
        maxLoadedAdapters: 2,
        adapters: WORLD.adapters.slice(0, 11),
        loadMs: 200,
        decodeMsPerStep: 100,
        coldLoadsPerMinute: 1000,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 1000,
        spanMs: 4308,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 2000,
        sloClasses: [
          { name: 'interactive', ttft_ms: 1000, priority: 0 },
          { name: 'batch', ttft_ms: 2500, priority: -1 },
        ],
      },
      [
        { at: 90, kind: 'request', node: 0, adapter: 9, tokens: 9, prompt: 958 },
        {
          at: 404,
          kind: 'request',
          node: 2,
          adapter: -1,
          tokens: 1,
          prompt: 107,
          cls: 'batch',
          sourceMs: 178,
        },
        { at: 461, kind: 'request', node: 1, adapter: 10, tokens: 1, prompt: 556, exit: true, sourceMs: 111 },
        { at: 553, kind: 'request', node: 1, adapter: 5, tokens: 1, prompt: 1177, sourceMs: 99 },
        { at: 1425, kind: 'request', node: 2, adapter: -1, tokens: 2, prompt: 1471 },
        { at: 1509, kind: 'slow-path', node: 0, replica: 0, ms: 3446, hopMs: 2779 },
        { at: 1509, kind: 'slow-path', node: 0, replica: 1, ms: 3446, hopMs: 2779 },
        {
          at: 1529,
          kind: 'request',
          node: 0,
          adapter: 9,
          tokens: 14,
          prompt: 1405,
          gaveUp: { afterMs: 2183, unwritten: true, noticeMs: 143 },
        },
        { at: 1725, kind: 'request', node: 1, adapter: 3, tokens: 1, prompt: 818, cls: 'interactive' },
        {
          at: 1760,
          kind: 'request',
          node: 2,
          adapter: 6,
          tokens: 1,
          prompt: 1160,
          cls: 'batch',
          gaveUp: { afterMs: 40, unwritten: true, noticeMs: 1 },
          sourceMs: 92,
        },
        { at: 1829, kind: 'request', node: 1, adapter: 0, tokens: 2, prompt: 430, cls: 'interactive' },
        {
          at: 1983,
          kind: 'request',
          node: 2,
          adapter: 5,
          tokens: 1,
          prompt: 1880,
          cls: 'batch',
          gaveUp: { afterMs: 2807, unwritten: false, noticeMs: 174 },
        },
        { at: 2075, kind: 'flushall' },
        { at: 2196, kind: 'config-push', node: 0 },
        { at: 3110, kind: 'request', node: 1, adapter: 5, tokens: 1, prompt: 1379, cls: 'interactive' },
        {
          at: 3117,
          kind: 'request',
          node: 1,
          adapter: 5,
          tokens: 3,
          prompt: 990,
          cls: 'batch',
          gaveUp: { afterMs: 448, unwritten: true, noticeMs: 94 },
        },
        { at: 3739, kind: 'request', node: 2, adapter: 9, tokens: 5, prompt: 1920, sourceMs: 9 },
        { at: 3881, kind: 'request', node: 2, adapter: 5, tokens: 3, prompt: 283 },
        { at: 4217, kind: 'request', node: 1, adapter: 6, tokens: 2, prompt: 1302 },
        { at: 4221, kind: 'request', node: 2, adapter: 0, tokens: 2, prompt: 1052, sourceMs: 63 },
        { at: 4241, kind: 'request', node: 1, adapter: 5, tokens: 5, prompt: 1137 },
        { at: 4263, kind: 'request', node: 2, adapter: 2, tokens: 3, prompt: 682 },
        { at: 4286, kind: 'request', node: 1, adapter: 2, tokens: 1, prompt: 1886, sourceMs: 25 },
        { at: 4297, kind: 'request', node: 2, adapter: 7, tokens: 1, prompt: 973, sourceMs: 149 },
        { at: 4301, kind: 'request', node: 2, adapter: 7, tokens: 6, prompt: 756 },
        { at: 4304, kind: 'request', node: 2, adapter: 0, tokens: 4, prompt: 237, sourceMs: 247 },
        {
          at: 4305,
          kind: 'request',
          node: 1,
          adapter: 5,
          tokens: 3,
          prompt: 295,
          gaveUp: { afterMs: 2475, unwritten: true, noticeMs: 282 },
        },
      ],
    );
  }, 30_000);
});

describe('a hold never waits with nothing that could change: a node back from an outage during a FLUSHALL', () => {
  // Seed 264535 (--keep 0,1,2,8,9,12,13,15): a partition of every node (430-684 ms) left node 0
  // deciding alone from 1,045 ms (a release sent into it timed out), and a FLUSHALL at 1,554 ms
  // emptied Redis meanwhile. Node 0's probe took its state back at 2,065 ms, its registration
  // reading the new epoch, and it held off its unloads from then; but the "state lost" note that
  // registration left was taken only by a views call at 2,945 ms, which took the state back again
  // and held unloads off anew until 4,945 ms. Node 0's request for `code` (1,884 ms), alone on an
  // idle fleet, waited for room on replica-1 (`chat` and `a` idle) until 5,087 ms: routed after
  // 3,429 ms, past the bound of 3,400.
  it('seed 264535: a node back from an outage during a FLUSHALL holds off its unloads once', async () => {
    await holds(
      264535,
      {
        ...WORLD,
        maxLoadedAdapters: 2,
        adapters: WORLD.adapters.slice(0, 7),
        loadMs: 200,
        decodeMsPerStep: 50,
        coldLoadsPerMinute: 6,
        spanMs: 2000,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 2000,
      },
      [
        { at: 51, kind: 'request', node: 2, adapter: 1, tokens: 4, prompt: 1553 },
        { at: 160, kind: 'request', node: 0, adapter: 2, tokens: 3, prompt: 234 },
        { at: 430, kind: 'partition', node: -1, ms: 254 },
        { at: 1174, kind: 'request', node: 1, adapter: -1, tokens: 1, prompt: 1304 },
        { at: 1220, kind: 'replica-restart', replica: 0, downMs: 3 },
        { at: 1327, kind: 'request', node: 1, adapter: 4, tokens: 2, prompt: 1349 },
        { at: 1554, kind: 'flushall' },
        { at: 1884, kind: 'request', node: 0, adapter: 5, tokens: 3, prompt: 1257 },
      ],
    );
  }, 30_000);
});

describe('a hold never waits with nothing that could change: a decision whose calls crossed a slow path', () => {
  // Seed 536271 (--keep 1,2,3,15,16): node 1's path to replica-1 slow from 1,741 ms for 1,331 ms, 1,829 ms
  // each way. Node 1's request for `law` (1,989 ms), alone on an idle fleet, read replica-1's registry
  // before its load (timed out at 1,000 ms) and sent the load at 3,005 ms, before the path healed: the
  // call timed out at 3,000 ms, the registry then listed `law` and the request routed after 4,021 ms, past
  // the bound of 3,400. The router waited on nothing but the slow path's round trips.
  it('seed 536271: the time a decision waits on a slow path is not held against it', async () => {
    await holds(
      536271,
      {
        nodes: 3,
        replicas: 2,
        maxLoadedAdapters: 4,
        adapters: WORLD.adapters.slice(0, 10),
        loadMs: 200,
        decodeMsPerStep: 50,
        coldLoadsPerMinute: 1000,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 0,
        spanMs: 2000,
        staticAdapters: ['sql,chat'],
        queueTimeoutMs: 4000,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 2000,
      },
      [
        { at: 108, kind: 'request', node: 0, adapter: 0, tokens: 5, prompt: 1435 },
        { at: 145, kind: 'partition', node: -1, ms: 1294 },
        { at: 258, kind: 'request', node: 1, adapter: 6, tokens: 5, prompt: 1095 },
        { at: 1741, kind: 'slow-path', node: 1, replica: 1, ms: 1331, hopMs: 1829 },
        { at: 1989, kind: 'request', node: 1, adapter: 7, tokens: 6, prompt: 305 },
      ],
    );
  }, 30_000);
});

describe('a replica seen down gets no request: a decision made while every replica was down', () => {
  // Seed 317260 (--keep 0,1,3,4,5,6,7,8,9,10,11,15,16,17): replica-0 answers 500 from 948 ms and is
  // polled down at 949 ms; replica-1, restarting from 923 ms, is polled down at 1,047 ms. Node 2's
  // request for `team` (1,942 ms) sees every replica down, the health filter fails open, and it is
  // decided on replica-0 to wait for node 1's load of `team` there (begun at 422 ms). Replica-1 is
  // polled up at 1,987 ms; the load ends at 3,124 ms and the request was proxied to replica-0, seen
  // down 2.2 s: the check after the load was made only for a replica decided up. It is made for one
  // decided down too, and with another seen up now the request is decided again.
  it('seed 317260: a request decided failing open is decided again once another replica is seen up', async () => {
    await holds(
      317260,
      {
        nodes: 3,
        replicas: 2,
        maxLoadedAdapters: 4,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math', 'law'],
        loadMs: 1500,
        decodeMsPerStep: 50,
        coldLoadsPerMinute: 3,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 1000,
        spanMs: 6000,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 2000,
      },
      [
        { at: 84, kind: 'request', node: 1, adapter: 4, tokens: 6, prompt: 1643 },
        { at: 101, kind: 'request', node: 1, adapter: 2, tokens: 100, prompt: 465 },
        { at: 337, kind: 'skew', node: 0, ms: 141 },
        { at: 412, kind: 'request', node: 1, adapter: 3, tokens: 3, prompt: 1418 },
        { at: 615, kind: 'request', node: 2, adapter: 2, tokens: 6, prompt: 831 },
        { at: 652, kind: 'request', node: 2, adapter: 1, tokens: 1, prompt: 260 },
        { at: 831, kind: 'request', node: 0, adapter: -1, tokens: 4, prompt: 343 },
        { at: 923, kind: 'replica-restart', replica: 1, downMs: 580 },
        { at: 948, kind: 'replica-outage', replica: 0, ms: 2461, mode: 'error500' },
        { at: 1090, kind: 'request', node: 2, adapter: 2, tokens: 1, prompt: 597 },
        { at: 1299, kind: 'request', node: 2, adapter: -1, tokens: 5, prompt: 714 },
        { at: 1579, kind: 'request', node: 0, adapter: 5, tokens: 2, prompt: 656 },
        { at: 1942, kind: 'request', node: 2, adapter: 3, tokens: 2, prompt: 1374 },
        { at: 4668, kind: 'request', node: 1, adapter: 1, tokens: 1, prompt: 1174 },
      ],
    );
  }, 30_000);
});

describe('no lease left open after quiescence: a release whose reply the old primary sent late', () => {
  // Seed 140805 (--keep 2,3,4,5,8), the simulated Redis's mistake, not the router's: node 2's release
  // of n2g0-0 runs at the primary at 1,044 ms, its reply slowed 479 ms; a Sentinel switch at 1,149 ms
  // loses the last 5 writes, the release among them. Node 2's heartbeat finds the new server at
  // 1,502 ms, its prune (1,508 ms) keeps n2g0-0 (its release under way), and the old server's reply
  // came at 1,525 ms, after calls the new one had answered: one TCP stream cannot do that (ioredis
  // fails what the old stream owed when it closes). The model's link now fails such a call, the
  // release is replayed on recovery, and the lease is given back there.
  it('seed 140805: a reply owed by the old server fails once the link reaches the new one', async () => {
    await holds(
      140805,
      {
        nodes: 3,
        replicas: 3,
        maxLoadedAdapters: 2,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a'],
        loadMs: 200,
        decodeMsPerStep: 50,
        coldLoadsPerMinute: 6,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 0,
        spanMs: 2000,
        queueTimeoutMs: 4000,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 2000,
      },
      [
        { at: 464, kind: 'request', node: 0, adapter: 4, tokens: 4, prompt: 1798 },
        { at: 989, kind: 'request', node: 2, adapter: 4, tokens: 1, prompt: 873 },
        { at: 1009, kind: 'slow', node: 2, ms: 263, slowMs: 479 },
        { at: 1051, kind: 'request', node: 1, adapter: 3, tokens: 2, prompt: 1488 },
        { at: 1149, kind: 'switch', lost: 5 },
      ],
    );
  }, 30_000);
});

describe('loaded adapters within max_loaded_adapters: an excess the replica reports busy through a comma', () => {
  // Seed 111053 (--keep 0,1,2,3,4,5,6,8,11): after a FLUSHALL (45 ms) three loads decided on different
  // views land on replica-1 (limit 2): `a` (825 ms), `team,a` (1,625 ms) and `team` (2,425 ms), whose
  // after-load undo is held off (claimed during the FLUSHALL's unload hold-off, seed 37497). Polls then
  // find `a` and `team` idle but read busy: `team,a` runs an 80-token request until 7,740 ms, and vLLM's
  // label `running_lora_adapters="team,a"` may as well be `team` and `a` (docs/reliability.md, "A name
  // with a comma is never read as idle"), then the unseen hold of 2 s. The check's grace now runs from
  // when the replica's report stopped reading the idle excess busy.
  it('seed 111053: an excess read busy through a comma name is trimmed once the report reads it idle', async () => {
    await holds(
      111053,
      {
        nodes: 3,
        replicas: 2,
        maxLoadedAdapters: 2,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math'],
        loadMs: 800,
        decodeMsPerStep: 100,
        coldLoadsPerMinute: 1000,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 0,
        spanMs: 6000,
        staticAdapters: ['sql,chat'],
        queueTimeoutMs: 4000,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 500,
      },
      [
        { at: 8, kind: 'request', node: 0, adapter: 4, tokens: 1, prompt: 961 },
        { at: 45, kind: 'flushall' },
        { at: 120, kind: 'request', node: 1, adapter: 7, tokens: 1, prompt: 1203 },
        { at: 223, kind: 'request', node: 1, adapter: 7, tokens: 3, prompt: 219 },
        { at: 292, kind: 'request', node: 1, adapter: 2, tokens: 2, prompt: 340 },
        { at: 449, kind: 'request', node: 2, adapter: 4, tokens: 1, prompt: 306 },
        { at: 508, kind: 'request', node: 2, adapter: 2, tokens: 80, prompt: 706 },
        { at: 777, kind: 'request', node: 2, adapter: 3, tokens: 3, prompt: 1418 },
        { at: 1151, kind: 'process-restart', node: 1 },
      ],
    );
  }, 30_000);
});

describe('loaded adapters within max_loaded_adapters: an excess a crowd keeps busy', () => {
  // Seed 6215 (--keep 0,2,3,4,5,6,7,8,9,10,11,12,13,14,24,25,26,27,42,43,44,45,46; a crowd at node 1,
  // SLO classes): replica-1 has one slot. Node 1 loads `team,a` there (362-1,862 ms); right after the
  // FLUSHALL at 980 ms node 2, on the emptied state, loads `team` there too (1,012 ms; vLLM serialises
  // it behind `team,a`: 3,362 ms). Its after-load check keeps it: `team,a` waits, and the label
  // `waiting_lora_adapters="team,a"` reads `team` busy. From 3,702 ms node 1's crowd keeps both running or
  // waiting (4 running slots), to 9,879 ms: a trim takes only idle adapters (docs/reliability.md, "a busy
  // excess stays until it is idle"). The check's grace now runs from when an adapter there is idle.
  it('seed 6215: an excess whose every adapter runs or waits stays until one is idle', async () => {
    await holds(
      6215,
      {
        nodes: 3,
        replicas: 2,
        maxLoadedAdapters: 1,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math', 'law'],
        loadMs: 1500,
        decodeMsPerStep: 100,
        coldLoadsPerMinute: 1000,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 1000,
        spanMs: 7082,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 500,
        queueTimeoutMs: 2000,
        maxNumSeqs: 4,
        sloClasses: [
          { name: 'interactive', ttft_ms: 1000, priority: 0 },
          { name: 'batch', ttft_ms: 2500, priority: -1 },
        ],
      },
      [
        { at: 81, kind: 'request', node: 0, adapter: 5, tokens: 4, prompt: 1406, cls: 'batch' },
        { at: 347, kind: 'request', node: 1, adapter: 2, tokens: 2, prompt: 130, cls: 'batch' },
        { at: 568, kind: 'request', node: 2, adapter: -1, tokens: 3, prompt: 1413, cls: 'batch' },
        { at: 576, kind: 'request', node: 2, adapter: 6, tokens: 3, prompt: 20, cls: 'interactive' },
        { at: 583, kind: 'request', node: 0, adapter: 7, tokens: 3, prompt: 1788, cls: 'interactive' },
        { at: 643, kind: 'request', node: 1, adapter: 0, tokens: 5, prompt: 687, cls: 'batch' },
        { at: 747, kind: 'request', node: 2, adapter: 3, tokens: 4, prompt: 493, cls: 'batch' },
        { at: 894, kind: 'skew', node: 0, ms: -105 },
        { at: 921, kind: 'request', node: 1, adapter: 6, tokens: 3, prompt: 720, cls: 'interactive' },
        { at: 976, kind: 'request', node: 2, adapter: 4, tokens: 5, prompt: 536, cls: 'interactive' },
        { at: 977, kind: 'request', node: 2, adapter: 4, tokens: 3, prompt: 1366, cls: 'interactive' },
        { at: 978, kind: 'request', node: 2, adapter: 0, tokens: 1, prompt: 458, cls: 'interactive' },
        { at: 980, kind: 'flushall' },
        { at: 980, kind: 'slow-path', node: 2, replica: 0, ms: 1276, hopMs: 1960 },
        { at: 3702, kind: 'request', node: 1, adapter: -1, tokens: 60, prompt: 1970, cls: 'interactive' },
        { at: 3721, kind: 'request', node: 1, adapter: 3, tokens: 47, prompt: 1434, cls: 'interactive' },
        { at: 3765, kind: 'request', node: 1, adapter: -1, tokens: 46, prompt: 1544, cls: 'batch' },
        { at: 3801, kind: 'request', node: 1, adapter: 2, tokens: 40, prompt: 1056, cls: 'batch' },
        { at: 5124, kind: 'request', node: 1, adapter: 2, tokens: 28, prompt: 1250 },
        { at: 5469, kind: 'request', node: 1, adapter: -1, tokens: 35, prompt: 2000 },
        { at: 5511, kind: 'request', node: 1, adapter: 2, tokens: 41, prompt: 1933, cls: 'batch' },
        { at: 5551, kind: 'request', node: 1, adapter: 3, tokens: 59, prompt: 1565, cls: 'interactive' },
        { at: 5918, kind: 'request', node: 1, adapter: 3, tokens: 40, prompt: 1214, cls: 'batch' },
      ],
    );
  }, 30_000);
});

describe('loaded adapters within max_loaded_adapters: an excess held by the lease of a dead process', () => {
  // Seed 102896 (--keep 0,1,2,4,5,6,7,9,10,11,12,13,14,20): replica-0 has one slot. Node 2 leases `sql`
  // and `team,a` there and begins loading `sql` (1,213 ms); its process dies at 1,248 ms. Its load lock
  // ends once its node id is silent past node_ttl_ms (1,735 ms), so the store forgets the load while the
  // replica carries on, and node 0 loads `team,a` into the slot it reads free (1,745 ms). Both land (2,015
  // and 2,815 ms): 2 for a limit of 1. `team,a` runs node 0's 114-token request until ~7,800 ms; `sql`
  // is idle, but the dead process's lease holds it in the store (the trim unloads nothing a lease
  // holds) until it ages out (lease_max_age_ms 4 s, renewed at ~6,050 ms by node 1's `sql` request,
  // docs/reliability.md "A lease whose log phase never came is reclaimed, and only then"): `sql` goes
  // at ~10,200 ms. The check's grace now runs from when no dead process's lease holds the idle excess.
  it('seed 102896: an idle excess a dead process leased is trimmed once its lease ages out', async () => {
    await holds(
      102896,
      {
        nodes: 3,
        replicas: 2,
        maxLoadedAdapters: 1,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math', 'law', 'med', 'fin'],
        loadMs: 800,
        decodeMsPerStep: 100,
        coldLoadsPerMinute: 6,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 0,
        spanMs: 6000,
        staticAdapters: ['sql,chat'],
        queueTimeoutMs: 4000,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 500,
      },
      [
        { at: 53, kind: 'scrape', replica: 1, ms: 2170, mode: 'timeout' },
        { at: 195, kind: 'request', node: 0, adapter: 2, tokens: 114, prompt: 1464 },
        { at: 197, kind: 'request', node: 2, adapter: 0, tokens: 1, prompt: 1944 },
        { at: 234, kind: 'request', node: 0, adapter: 7, tokens: 2, prompt: 606 },
        { at: 238, kind: 'request', node: 2, adapter: 2, tokens: 3, prompt: 824 },
        { at: 552, kind: 'request', node: 1, adapter: 9, tokens: 1, prompt: 1387 },
        { at: 704, kind: 'slow-path', node: 1, replica: 0, ms: 737, hopMs: 327 },
        { at: 1102, kind: 'request', node: 1, adapter: -1, tokens: 5, prompt: 1480 },
        { at: 1104, kind: 'request', node: 0, adapter: 5, tokens: 5, prompt: 1113 },
        { at: 1216, kind: 'request', node: 1, adapter: 7, tokens: 4, prompt: 12 },
        { at: 1248, kind: 'process-restart', node: 2 },
        { at: 1329, kind: 'request', node: 1, adapter: 8, tokens: 5, prompt: 436 },
        { at: 1416, kind: 'request', node: 2, adapter: 3, tokens: 35, prompt: 862 },
        { at: 5921, kind: 'request', node: 1, adapter: 0, tokens: 1, prompt: 581 },
      ],
    );
  }, 30_000);
});

describe('a hold never waits with nothing that could change: room made for an adapter another load took', () => {
  // Seed 437527 (all 16 actions; it does not shrink): at 881 ms node 1 unloads idle `med` on replica-2
  // (limit 1) to make room for `a`, and the store keeps that room for `a` until `a`'s load begins (one
  // unload per load) or the unload's TTL passes (~10 s). The fleet's cold-load budget (6) then refuses
  // node 1's request (429), and node 0's request for `team`, waiting for room there, loads into the slot.
  // Node 2's request for `a` at 1,844 ms, alone on an idle fleet, finds replica-2 full with `team` idle;
  // every unload of `team` for `a` was refused by the room kept for `a`, which no longer existed, until
  // its queue_timeout_ms: a 503 after 8,126 ms. A room made for `a` now refuses an unload only while the
  // replica has a free slot by the caller's limit: `team` filled it, so the unload goes.
  it('seed 437527: a load that fills the replica takes the room an unload made for another adapter', async () => {
    await holds(
      437527,
      {
        nodes: 3,
        replicas: 3,
        maxLoadedAdapters: 1,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math', 'law', 'med', 'fin', 'bio'],
        loadMs: 200,
        decodeMsPerStep: 50,
        coldLoadsPerMinute: 6,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 1000,
        spanMs: 2000,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 2000,
      },
      [
        { at: 21, kind: 'request', node: 2, adapter: 9, tokens: 1, prompt: 1067 },
        { at: 98, kind: 'request', node: 1, adapter: 8, tokens: 1, prompt: 1650 },
        { at: 165, kind: 'skew', node: 0, ms: 127 },
        { at: 169, kind: 'request', node: 1, adapter: 5, tokens: 1, prompt: 345 },
        { at: 321, kind: 'skew', node: 1, ms: 281 },
        { at: 405, kind: 'request', node: 0, adapter: -1, tokens: 6, prompt: 269 },
        { at: 508, kind: 'request', node: 0, adapter: 3, tokens: 4, prompt: 1198 },
        { at: 619, kind: 'request', node: 2, adapter: 7, tokens: 5, prompt: 847 },
        { at: 684, kind: 'request', node: 0, adapter: 6, tokens: 2, prompt: 621 },
        { at: 817, kind: 'request', node: 2, adapter: 6, tokens: 4, prompt: 413 },
        { at: 818, kind: 'request', node: 1, adapter: 7, tokens: 6, prompt: 1040 },
        { at: 877, kind: 'request', node: 1, adapter: 4, tokens: 1, prompt: 1333 },
        { at: 1267, kind: 'request', node: 1, adapter: 0, tokens: 1, prompt: 964 },
        { at: 1477, kind: 'request', node: 0, adapter: 2, tokens: 3, prompt: 1306 },
        { at: 1615, kind: 'request', node: 0, adapter: 0, tokens: 1, prompt: 1229 },
        { at: 1844, kind: 'request', node: 2, adapter: 4, tokens: 3, prompt: 1993 },
      ],
    );
  }, 30_000);
});

describe('a replica seen down gets no request: judged from what the decision last read', () => {
  // Seed 516051 (--keep 4,11,12,14; the check's, not the router's): replica-1 holds `team,a` (node 2's
  // load, 912 ms) and answers 500 from 1,233 ms; every node's polls ran at ~1,041-1,075 ms and next at
  // ~2,097-2,108 ms. Node 1's link to Redis answers 419 ms late from 1,466 ms. Its request for `team,a`
  // at 1,967 ms reads views on Redis before any poll saw the fault (replica-1 up, checked at 1,069 ms),
  // gets them at 2,387 ms, takes the lease (reply 2,806 ms) and is proxied at 2,807 ms: 1,574 ms into
  // the fault, past a poll and the slack, though nothing it read could say down (node 0's poll wrote it
  // at 2,102 ms). The check now leaves out the time the request waited on late replies since its read.
  it('seed 516051: a warm decision slowed by its own late replies, read before any poll saw the fault', async () => {
    await holds(
      516051,
      {
        nodes: 3,
        replicas: 2,
        maxLoadedAdapters: 4,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math'],
        loadMs: 200,
        decodeMsPerStep: 50,
        coldLoadsPerMinute: 1000,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 0,
        spanMs: 2000,
        queueTimeoutMs: 4000,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 500,
      },
      [
        { at: 687, kind: 'request', node: 2, adapter: 2, tokens: 5, prompt: 1395 },
        { at: 1233, kind: 'replica-outage', replica: 1, ms: 2397, mode: 'error500' },
        { at: 1466, kind: 'slow', node: 1, ms: 1489, slowMs: 419 },
        { at: 1967, kind: 'request', node: 1, adapter: 2, tokens: 3, prompt: 633 },
      ],
    );
  }, 30_000);
});

describe('a replica seen down gets no request: a guessed lease given back on a link that got no answer', () => {
  // Seed 1635447 (--keep 0,1,3,6,7,10,14; the router's, since acquire-overtake): replica-1 answers
  // 500 from 1,057 ms; node 2's link to Redis answers 2,037 ms late from 1,425 ms. Node 2's
  // base-model request (1,826 ms) takes views and its guessed lease in one call, which times out at
  // 2,326 ms: the node decides alone on replica-1 (its own polls had not seen it down yet) and gives
  // the guessed lease back. That release went on the acquire's link, behind it, and the request
  // waited for it: it timed out at 2,826 ms, node 2 polled replica-1 down at 2,464 ms, and the
  // request went there 1,769 ms into the outage. The release there is sent, not waited for, now: the
  // local store answers (test/core/release-unanswered.test.ts).
  it('seed 1635447: a decision alone is not held up by the release of its guessed lease', async () => {
    await holds(
      1635447,
      {
        nodes: 3,
        replicas: 3,
        maxLoadedAdapters: 4,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code'],
        loadMs: 200,
        decodeMsPerStep: 100,
        coldLoadsPerMinute: 6,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 1000,
        spanMs: 6000,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 2000,
      },
      [
        { at: 172, kind: 'request', node: 2, adapter: 2, tokens: 6, prompt: 186 },
        { at: 492, kind: 'request', node: 2, adapter: -1, tokens: 5, prompt: 284 },
        { at: 731, kind: 'request', node: 0, adapter: 4, tokens: 40, prompt: 1513 },
        { at: 1057, kind: 'replica-outage', replica: 1, ms: 3321, mode: 'error500' },
        { at: 1067, kind: 'request', node: 0, adapter: 0, tokens: 26, prompt: 1189 },
        { at: 1425, kind: 'slow', node: 2, ms: 1175, slowMs: 2037 },
        { at: 1826, kind: 'request', node: 2, adapter: -1, tokens: 5, prompt: 1305 },
      ],
    );
  }, 30_000);
});

describe('the cold-load budget goes to loads: a slot claim whose call a Sentinel switch failed', () => {
  // Seed 531770 (all 16 actions; the check's, not the router's): node 2's request 9 for `code`
  // finds a slot freed on replica-1 just after node 1 made it for its own `code` load (begun at
  // 1,696 ms), spends the fleet's budget (granted at 1,698 ms) and sends beginLoad; a Sentinel
  // switch (no write lost) at 1,701 ms fails that call before the server runs it, and the failover
  // store claims in its local store alone (refused: full there), then joins node 1's load. The
  // budget check counted only the claims the modelled server ran, and judged request 8's 429 at
  // 4,919 ms a window of 6 grants with one unused. A claim whose call failed on the link counts now.
  it('seed 531770: a slot claim a Sentinel switch failed, made alone, counts for the budget', async () => {
    await holds(
      531770,
      {
        nodes: 3,
        replicas: 2,
        maxLoadedAdapters: 2,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math'],
        loadMs: 200,
        decodeMsPerStep: 100,
        coldLoadsPerMinute: 6,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 0,
        spanMs: 2000,
        queueTimeoutMs: 4000,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 2000,
      },
      [
        { at: 354, kind: 'request', node: 1, adapter: 3, tokens: 5, prompt: 996 },
        { at: 439, kind: 'request', node: 1, adapter: 6, tokens: 6, prompt: 803 },
        { at: 643, kind: 'request', node: 0, adapter: 3, tokens: 4, prompt: 784 },
        { at: 706, kind: 'request', node: 0, adapter: 1, tokens: 6, prompt: 398 },
        { at: 822, kind: 'request', node: 1, adapter: 2, tokens: 6, prompt: 1807 },
        { at: 827, kind: 'request', node: 1, adapter: 0, tokens: 5, prompt: 935 },
        { at: 1088, kind: 'request', node: 2, adapter: 6, tokens: 1, prompt: 1745 },
        { at: 1194, kind: 'request', node: 0, adapter: 0, tokens: 6, prompt: 982 },
        { at: 1225, kind: 'request', node: 2, adapter: 5, tokens: 4, prompt: 1319 },
        { at: 1286, kind: 'request', node: 1, adapter: 1, tokens: 6, prompt: 1985 },
        { at: 1424, kind: 'request', node: 2, adapter: 0, tokens: 3, prompt: 505 },
        { at: 1452, kind: 'request', node: 1, adapter: 0, tokens: 6, prompt: 1308 },
        { at: 1597, kind: 'request', node: 1, adapter: 5, tokens: 3, prompt: 490 },
        { at: 1635, kind: 'request', node: 2, adapter: 4, tokens: 3, prompt: 904 },
        { at: 1686, kind: 'request', node: 2, adapter: 5, tokens: 2, prompt: 407 },
        { at: 1701, kind: 'switch', lost: 0 },
      ],
    );
  }, 30_000);
});

describe('no lease left open after quiescence: a runtime replaced on the same state, then its successor on other state', () => {
  // Seed 556526 (--keep 0,1,3,9,13,14,15): node 1's runtime A (node id n1g0, db 0) holds three leases;
  // a same-state record change at 1,123 ms makes B (same node id), a change to other state at 1,936 ms
  // retires B. Node 1's link is slow from 1,380 ms: A's release of n1g0-0 times out at 1,921 ms and A
  // decides alone. B, holding no lease, left db 0 at once; A's two requests ended after (2,298, 2,398
  // ms), their releases owed, and A handed them to B's closed store when it drained: never sent,
  // n1g0-1 open until it aged out. A store leaving for other state now waits until its same-state
  // predecessors have drained into it.
  it('seed 556526: the releases a same-state predecessor owes reach the old state after its successor left it', async () => {
    await holds(
      556526,
      {
        nodes: 3,
        replicas: 2,
        maxLoadedAdapters: 4,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math', 'law', 'med', 'fin', 'bio', 'geo'],
        loadMs: 800,
        decodeMsPerStep: 100,
        coldLoadsPerMinute: 3,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 1000,
        spanMs: 2000,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 500,
      },
      [
        { at: 44, kind: 'request', node: 1, adapter: 11, tokens: 5, prompt: 1023 },
        { at: 55, kind: 'request', node: 1, adapter: 3, tokens: 6, prompt: 435 },
        { at: 188, kind: 'request', node: 1, adapter: 0, tokens: 2, prompt: 133 },
        { at: 1055, kind: 'record-change', otherState: false, gapMs: 68 },
        { at: 1380, kind: 'slow', node: 1, ms: 316, slowMs: 1383 },
        { at: 1711, kind: 'record-change', otherState: true, gapMs: 584 },
        { at: 1779, kind: 'record-change', otherState: true, gapMs: 157 },
      ],
    );
  }, 30_000);
});

describe("no lease left open after quiescence: a retake a same-state predecessor's recovery sent as it closed", () => {
  // Seed 19811 (all 16 actions kept): node 1's runtime A (node id n1g0, db 0) decides alone after a
  // Redis restart (659-1,626 ms); a same-state record change makes B its successor (same node id).
  // A's probe finds Redis at 1,936 ms and its recovery re-takes n1g0-1, a lease A took alone; the
  // request ends while that retake is on the wire (released locally: it was local), A drains, B
  // adopts A's records and prunes (its own link, ahead of A's retake), and A's store closes. The
  // retake then lands, and the release A's restore sends for a lease ended meanwhile went to a
  // closed link: n1g0-1 open until it aged out. A store now stops probing and waits for its
  // hand-back under way (a probe's recovery, a reclaim) before it is adopted or leaves.
  it('seed 19811: a lease whose retake was on the wire when its request ended is released before the store closes', async () => {
    await holds(
      19811,
      {
        nodes: 3,
        replicas: 3,
        maxLoadedAdapters: 2,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math', 'law'],
        loadMs: 200,
        decodeMsPerStep: 50,
        coldLoadsPerMinute: 6,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 0,
        spanMs: 2000,
        staticAdapters: ['sql,chat'],
        queueTimeoutMs: 4000,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 2000,
      },
      [
        { at: 73, kind: 'replica-outage', replica: 0, ms: 970, mode: 'hang' },
        { at: 530, kind: 'request', node: 2, adapter: 7, tokens: 21, prompt: 258 },
        { at: 633, kind: 'request', node: 0, adapter: 1, tokens: 2, prompt: 1576 },
        { at: 647, kind: 'request', node: 2, adapter: 7, tokens: 1, prompt: 217 },
        { at: 659, kind: 'redis-restart', empty: false, downMs: 967 },
        { at: 661, kind: 'request', node: 2, adapter: 8, tokens: 5, prompt: 528 },
        { at: 684, kind: 'replica-restart', replica: 1, downMs: 583 },
        { at: 1314, kind: 'request', node: 0, adapter: 5, tokens: 2, prompt: 1393 },
        { at: 1335, kind: 'request', node: 0, adapter: 0, tokens: 3, prompt: 154 },
        { at: 1417, kind: 'record-change', otherState: false, gapMs: 251 },
        { at: 1525, kind: 'request', node: 0, adapter: -1, tokens: 4, prompt: 1686 },
        { at: 1580, kind: 'request', node: 1, adapter: 2, tokens: 5, prompt: 1691 },
        { at: 1613, kind: 'request', node: 1, adapter: 1, tokens: 4, prompt: 994 },
        { at: 1653, kind: 'request', node: 0, adapter: 3, tokens: 43, prompt: 1374 },
        { at: 1753, kind: 'request', node: 0, adapter: 2, tokens: 6, prompt: 1234 },
        { at: 1805, kind: 'request', node: 2, adapter: 8, tokens: 3, prompt: 925 },
      ],
    );
  }, 30_000);
});

// Found through a request routed on a slow path and still on its way (dst/request-routing.ts `onTheWay`).
describe('requests on their way the simulation found', () => {
  // Seed 638713 (--keep 0,2,3,4,5,8,9,11,13,19), a false alarm: a record change at 181 ms moves the
  // nodes to the other shared state 1215 ms apart (node 0 at 181, node 1 at 1396, node 2 at 2611).
  // Node 2, still on state 0, routes team,a to replica-1 at 1401 ms over a 1608 ms hop: its lease
  // is in state 0. Node 0, on state 1 since 181 ms, trims team,a there at 2590 ms: it never shared
  // a store with that lease (docs/reliability.md, not covered: record changes).
  it('seed 638713: an unloader on other shared state than the lease of the request on its way', async () => {
    await holds(
      638713,
      {
        nodes: 3,
        replicas: 3,
        maxLoadedAdapters: 1,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math'],
        loadMs: 200,
        decodeMsPerStep: 100,
        coldLoadsPerMinute: 1000,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 1000,
        spanMs: 3875,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 500,
      },
      [
        { at: 110, kind: 'request', node: 1, adapter: 2, tokens: 1, prompt: 919 },
        { at: 181, kind: 'record-change', otherState: true, gapMs: 1215 },
        { at: 271, kind: 'request', node: 2, adapter: 3, tokens: 5, prompt: 1009 },
        { at: 371, kind: 'request', node: 2, adapter: 2, tokens: 3, prompt: 1063 },
        { at: 374, kind: 'request', node: 2, adapter: 2, tokens: 5, prompt: 1557 },
        { at: 375, kind: 'flushall' },
        { at: 375, kind: 'slow-path', node: 2, replica: 1, ms: 1032, hopMs: 1608 },
        { at: 773, kind: 'request', node: 0, adapter: 2, tokens: 5, prompt: 163 },
        { at: 1093, kind: 'request', node: 0, adapter: 5, tokens: 2, prompt: 1102 },
        { at: 1379, kind: 'request', node: 0, adapter: 6, tokens: 6, prompt: 1471 },
      ],
    );
  }, 30_000);

  // Seed 609813 (--keep 0,1,2,3,4,5,9,...,27), a break: a FLUSHALL at 965 ms; node 0 found it and
  // began registering its replicas again; its acquire for sql on replica-1 reached the emptied
  // state before the registration (counted nowhere) and its reply came after the restore had read
  // the leases held, so nobody took it again. Its request went over a slow path (1624 ms hop) and
  // node 0's own trim unloaded sql at 2982 ms with it on its way. Fixed in failover-store.ts
  // (`takeAgain`); test/core/reclaim-in-flight.test.ts pins it.
  it('seed 609813: a lease whose acquire ran across a reclaim counts once the reclaim ends', async () => {
    await holds(
      609813,
      {
        nodes: 3,
        replicas: 2,
        maxLoadedAdapters: 2,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math', 'law', 'med', 'fin', 'bio'],
        loadMs: 800,
        decodeMsPerStep: 100,
        coldLoadsPerMinute: 1000,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 0,
        spanMs: 4465,
        queueTimeoutMs: 4000,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 500,
      },
      [
        { at: 85, kind: 'request', node: 1, adapter: 0, tokens: 1, prompt: 1439 },
        { at: 215, kind: 'request', node: 0, adapter: 2, tokens: 4, prompt: 918 },
        { at: 238, kind: 'request', node: 1, adapter: 0, tokens: 5, prompt: 1266 },
        { at: 264, kind: 'request', node: 0, adapter: 10, tokens: 1, prompt: 1975 },
        { at: 360, kind: 'flushall' },
        { at: 418, kind: 'request', node: 2, adapter: 6, tokens: 1, prompt: 1101 },
        { at: 962, kind: 'request', node: 0, adapter: 6, tokens: 6, prompt: 779 },
        { at: 963, kind: 'request', node: 0, adapter: 0, tokens: 2, prompt: 1437 },
        { at: 964, kind: 'request', node: 0, adapter: 4, tokens: 1, prompt: 1511 },
        { at: 965, kind: 'flushall' },
        { at: 965, kind: 'slow-path', node: 0, replica: 1, ms: 1343, hopMs: 1624 },
        { at: 965, kind: 'request', node: 0, adapter: 2, tokens: 1, prompt: 722 },
        { at: 1092, kind: 'request', node: 2, adapter: 2, tokens: 2, prompt: 1106 },
        { at: 1304, kind: 'request', node: 0, adapter: 8, tokens: 5, prompt: 459 },
        { at: 1526, kind: 'request', node: 1, adapter: 6, tokens: 6, prompt: 435 },
        { at: 1652, kind: 'request', node: 1, adapter: 2, tokens: 5, prompt: 1454 },
        { at: 1750, kind: 'request', node: 2, adapter: 4, tokens: 6, prompt: 506 },
        { at: 1777, kind: 'request', node: 1, adapter: 10, tokens: 5, prompt: 1049 },
        { at: 1826, kind: 'skew', node: 2, ms: 80 },
        { at: 2999, kind: 'request', node: 2, adapter: 5, tokens: 5, prompt: 534 },
        { at: 3080, kind: 'request', node: 1, adapter: 1, tokens: 6, prompt: 1994 },
        { at: 3441, kind: 'request', node: 2, adapter: 1, tokens: 3, prompt: 1403 },
        { at: 4301, kind: 'request', node: 2, adapter: 1, tokens: 6, prompt: 808 },
        { at: 4302, kind: 'request', node: 1, adapter: 5, tokens: 3, prompt: 1417 },
        { at: 4413, kind: 'request', node: 2, adapter: 7, tokens: 4, prompt: 1539 },
      ],
    );
  }, 30_000);

  // Seed 844981 (--keep 0,6,8,9,20,21,22,23), a false alarm: node 0 proxied math to replica-0 at
  // 1478 ms over a slow path (2960 ms hop) on lease n0g0-0. Its link to Redis turned slow past its
  // timeout at 1662 ms (replies 1982 ms late for 2110 ms); the FLUSHALL at 1820 ms lost the lease,
  // and node 0's heartbeats ran but their replies never came in time, so it registered nothing and
  // from 2517 ms decided alone, still at 4037 ms (its probe had not found Redis again). Node 1,
  // making room for chat, was granted math's unload at 4032 ms, the grace long over: the lease was
  // in no store it could read (docs/reliability.md, "Every node notices an emptied Redis", not covered).
  it('seed 844981: a lease an emptied state lost while its router, cut off, could not take it again', async () => {
    await holds(
      844981,
      {
        nodes: 3,
        replicas: 2,
        maxLoadedAdapters: 1,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math', 'law', 'med', 'fin', 'bio', 'geo'],
        loadMs: 800,
        decodeMsPerStep: 50,
        coldLoadsPerMinute: 1000,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 0,
        spanMs: 3956,
        staticAdapters: ['sql,chat'],
        queueTimeoutMs: 4000,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 500,
      },
      [
        { at: 59, kind: 'request', node: 2, adapter: 6, tokens: 26, prompt: 157 },
        { at: 454, kind: 'request', node: 0, adapter: 6, tokens: 4, prompt: 90 },
        { at: 456, kind: 'flushall' },
        { at: 456, kind: 'slow-path', node: 0, replica: 0, ms: 1050, hopMs: 2960 },
        { at: 1662, kind: 'slow', node: 0, ms: 2110, slowMs: 1982 },
        { at: 1820, kind: 'flushall' },
        { at: 2617, kind: 'request', node: 1, adapter: 7, tokens: 5, prompt: 1806 },
        { at: 2874, kind: 'request', node: 1, adapter: 1, tokens: 1, prompt: 1710 },
      ],
    );
  }, 30_000);

  // Seed 72667 (--keep 0,1,2,3,4,5,6,10,11,14,24,25), a false alarm: node 2 took lease n2g0-3 for
  // bio on replica-1 at 623 ms; the FLUSHALL at 653 ms lost it; node 2 proxied the request at 688 ms
  // over a slow path (2,429-ms hop). Told of the emptying, it registered its replicas again (732.5,
  // 797.5 ms) and took two of its four leases again (862.5, 927.5 ms) before its link turned slow
  // past its timeout (887 ms): the next acquire timed out at 1,427.5 ms, its reclaim failed before
  // n2g0-3 and it decided alone to the end. Its first bio request ran on replica-1 from 1,427.5 to
  // 1,748.1 ms, between two of node 0's polls there (1,034 and 1,988 ms), so no hold began; node 0,
  // making room for fin, unloaded bio at 3,068 ms, the second request still on its way.
  it('seed 72667: a lease whose router was cut off while taking its leases again, its earlier request seen by no read', async () => {
    await holds(
      72667,
      {
        nodes: 3,
        replicas: 2,
        maxLoadedAdapters: 2,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math', 'law', 'med', 'fin', 'bio'],
        loadMs: 200,
        decodeMsPerStep: 50,
        coldLoadsPerMinute: 1000,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 0,
        spanMs: 4153,
        queueTimeoutMs: 4000,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 500,
      },
      [
        { at: 34, kind: 'request', node: 1, adapter: 0, tokens: 5, prompt: 1821 },
        { at: 53, kind: 'slow-path', node: 2, replica: 0, ms: 625, hopMs: 641 },
        { at: 119, kind: 'request', node: 2, adapter: 1, tokens: 3, prompt: 1819 },
        { at: 208, kind: 'request', node: 2, adapter: 6, tokens: 6, prompt: 64 },
        { at: 321, kind: 'request', node: 2, adapter: 10, tokens: 6, prompt: 404 },
        { at: 530, kind: 'slow', node: 2, ms: 360, slowMs: 65 },
        { at: 555, kind: 'request', node: 2, adapter: 10, tokens: 5, prompt: 1222 },
        { at: 653, kind: 'flushall' },
        { at: 653, kind: 'slow-path', node: 2, replica: 1, ms: 695, hopMs: 2429 },
        { at: 887, kind: 'slow', node: 2, ms: 1579, slowMs: 1907 },
        { at: 2842, kind: 'request', node: 0, adapter: 7, tokens: 1, prompt: 1387 },
        { at: 3058, kind: 'request', node: 0, adapter: 9, tokens: 5, prompt: 111 },
      ],
    );
  }, 30_000);

  // Seed 501915 (--keep 0,...,16), a false alarm: replica-1 (limit 2) held team; request 10's load
  // of a failed at once (3,097 ms) and node 1 sent the claim's end, which the store ran at 3,099 ms,
  // after node 0's make-room unload of team for team,a (request 12), judged on team + a = 2 of 2.
  // The check took the claim's end at its sending; it now orders claims and grants by the store's
  // scripts (dst/room-making.ts `heldAt`).
  it("seed 501915: a failed load's end the store ran after a make-room grant counted that slot", async () => {
    await holds(
      501915,
      {
        nodes: 3,
        replicas: 2,
        maxLoadedAdapters: 2,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math', 'law'],
        loadMs: 200,
        decodeMsPerStep: 100,
        coldLoadsPerMinute: 1000,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 0,
        spanMs: 2000,
        queueTimeoutMs: 4000,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 500,
      },
      [
        { at: 55, kind: 'slow-path', node: 2, replica: 0, ms: 337, hopMs: 539 },
        { at: 224, kind: 'request', node: 0, adapter: 1, tokens: 1, prompt: 1801 },
        { at: 451, kind: 'request', node: 1, adapter: -1, tokens: 1, prompt: 1693 },
        { at: 603, kind: 'request', node: 1, adapter: 3, tokens: 2, prompt: 1943 },
        { at: 715, kind: 'request', node: 0, adapter: 2, tokens: 28, prompt: 551 },
        { at: 739, kind: 'replica-restart', replica: 0, downMs: 93 },
        { at: 768, kind: 'request', node: 2, adapter: 0, tokens: 2, prompt: 1757 },
        { at: 897, kind: 'request', node: 0, adapter: 6, tokens: 2, prompt: 938 },
        { at: 988, kind: 'flushall' },
        { at: 1040, kind: 'request', node: 1, adapter: 5, tokens: 4, prompt: 1080 },
        { at: 1212, kind: 'request', node: 0, adapter: 7, tokens: 5, prompt: 1746 },
        { at: 1262, kind: 'slow', node: 1, ms: 1154, slowMs: 452 },
        { at: 1289, kind: 'request', node: 2, adapter: 4, tokens: 6, prompt: 800 },
        { at: 1450, kind: 'request', node: 1, adapter: 4, tokens: 2, prompt: 640 },
        { at: 1683, kind: 'load-fail', replica: 1, count: 3, failure: 'rank' },
        { at: 1731, kind: 'request', node: 2, adapter: 6, tokens: 5, prompt: 1099 },
        { at: 1981, kind: 'request', node: 0, adapter: 2, tokens: 1, prompt: 907 },
      ],
    );
  }, 30_000);

  // Seed 500849 (all 16 actions), the same as 501915 on one node: request 7's load of a failed at
  // 5,545 ms; node 0's claim end ran at 5,547 ms, after its own request 12's unload of med for team
  // (sent 5,546 ms, run at once). The model let two calls of one link pass each other (a trip each);
  // it keeps each link's order now, and the schedule runs otherwise (dst-redis-model.test.ts).
  it("seed 500849: a claim's end run after a grant on the same link", async () => {
    await holds(
      500849,
      {
        nodes: 3,
        replicas: 2,
        maxLoadedAdapters: 2,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math', 'law', 'med', 'fin', 'bio', 'geo'],
        loadMs: 200,
        decodeMsPerStep: 100,
        coldLoadsPerMinute: 6,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 1000,
        spanMs: 2000,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 2000,
      },
      [
        { at: 117, kind: 'request', node: 2, adapter: 2, tokens: 2, prompt: 1553 },
        { at: 209, kind: 'request', node: 0, adapter: 7, tokens: 1, prompt: 1902 },
        { at: 464, kind: 'request', node: 0, adapter: 10, tokens: 2, prompt: 343 },
        { at: 518, kind: 'request', node: 0, adapter: 9, tokens: 5, prompt: 381 },
        { at: 550, kind: 'request', node: 2, adapter: 9, tokens: 4, prompt: 755 },
        { at: 709, kind: 'request', node: 1, adapter: 7, tokens: 4, prompt: 1814 },
        { at: 736, kind: 'request', node: 0, adapter: 4, tokens: 6, prompt: 1653 },
        { at: 935, kind: 'request', node: 2, adapter: 8, tokens: 3, prompt: 966 },
        { at: 1183, kind: 'load-fail', replica: 1, count: 2, failure: 'not-found' },
        { at: 1250, kind: 'request', node: 0, adapter: 11, tokens: 3, prompt: 1110 },
        { at: 1529, kind: 'request', node: 2, adapter: 2, tokens: 3, prompt: 915 },
        { at: 1699, kind: 'request', node: 0, adapter: 4, tokens: 2, prompt: 1141 },
        { at: 1836, kind: 'partition', node: 0, ms: 467 },
        { at: 1860, kind: 'request', node: 0, adapter: 3, tokens: 2, prompt: 132 },
        { at: 1942, kind: 'request', node: 0, adapter: 11, tokens: 6, prompt: 1446 },
        { at: 1981, kind: 'request', node: 0, adapter: 8, tokens: 6, prompt: 464 },
      ],
    );
  }, 30_000);

  // Seed 640336 (--keep 0,1,2,3,4,5,6,12,13), a false alarm: request 5 unloaded math on replica-1
  // for sql and its process restarted (710 ms) before it ended the unload's lock; the store counted
  // math unloading, sql's room, until it found node 0 silent. A grant on that count left 0 of 2; the
  // check now counts a room while the store held its unload's lock. Kept as shrunk: on main it broke
  // at request 8's unload of team for fin (granted at 1,521 ms), with the new check alone it holds.
  it("seed 640336: the room of a dead process's make-room unload counts while the store holds its lock", async () => {
    await holds(
      640336,
      {
        nodes: 3,
        replicas: 2,
        maxLoadedAdapters: 2,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math', 'law', 'med', 'fin'],
        loadMs: 200,
        decodeMsPerStep: 50,
        coldLoadsPerMinute: 1000,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 0,
        spanMs: 2000,
        staticAdapters: ['sql,chat'],
        queueTimeoutMs: 4000,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 2000,
      },
      [
        { at: 125, kind: 'request', node: 2, adapter: 8, tokens: 23, prompt: 1894 },
        { at: 152, kind: 'request', node: 0, adapter: 6, tokens: 3, prompt: 747 },
        { at: 344, kind: 'request', node: 0, adapter: 1, tokens: 2, prompt: 963 },
        { at: 516, kind: 'request', node: 2, adapter: 3, tokens: 1, prompt: 959 },
        { at: 693, kind: 'request', node: 0, adapter: 0, tokens: 3, prompt: 379 },
        { at: 705, kind: 'request', node: 2, adapter: 0, tokens: 6, prompt: 1943 },
        { at: 710, kind: 'process-restart', node: 0 },
        { at: 1399, kind: 'request', node: 1, adapter: 6, tokens: 1, prompt: 1129 },
        { at: 1513, kind: 'request', node: 0, adapter: 9, tokens: 6, prompt: 1884 },
      ],
    );
  }, 30_000);

  // Seed 708211 (--keep 0,...,25), a break: replica-1 (limit 4) held bio, a, med; code's load
  // failed and its end ran at 5,068 ms, just before request 18's make-room unload of bio for team:
  // the store granted it on 3 of 4, a slot left empty. Both stores now refuse an unload while a slot
  // is free that no room made for another adapter holds (test/core/fleet-store.test.ts). As shrunk,
  // request 16 (granted at 5,071 ms); it breaks with the new check and the old stores.
  it('seed 708211: no make-room unload while a failed load has given its slot back', async () => {
    await holds(
      708211,
      {
        nodes: 3,
        replicas: 2,
        maxLoadedAdapters: 4,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math', 'law', 'med', 'fin', 'bio'],
        loadMs: 200,
        decodeMsPerStep: 100,
        coldLoadsPerMinute: 1000,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 1000,
        spanMs: 6000,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 2000,
      },
      [
        { at: 150, kind: 'request', node: 1, adapter: 10, tokens: 2, prompt: 851 },
        { at: 337, kind: 'request', node: 2, adapter: 7, tokens: 3, prompt: 1916 },
        { at: 354, kind: 'scrape', replica: 0, ms: 726, mode: 'timeout' },
        { at: 389, kind: 'request', node: 0, adapter: 10, tokens: 6, prompt: 293 },
        { at: 450, kind: 'request', node: 2, adapter: 7, tokens: 6, prompt: 1583 },
        { at: 501, kind: 'replica-restart', replica: 0, downMs: 407 },
        { at: 782, kind: 'request', node: 1, adapter: 0, tokens: 30, prompt: 689 },
        { at: 844, kind: 'request', node: 0, adapter: 8, tokens: 6, prompt: 491 },
        { at: 923, kind: 'request', node: 1, adapter: 2, tokens: 100, prompt: 694 },
        { at: 1194, kind: 'request', node: 2, adapter: 4, tokens: 2, prompt: 1184 },
        { at: 1587, kind: 'request', node: 2, adapter: 0, tokens: 6, prompt: 1557 },
        { at: 1598, kind: 'request', node: 1, adapter: 8, tokens: 4, prompt: 448 },
        { at: 1646, kind: 'load-fail', replica: 1, count: 3, failure: 'engine' },
        { at: 1830, kind: 'request', node: 0, adapter: 9, tokens: 5, prompt: 1395 },
        { at: 4854, kind: 'request', node: 0, adapter: 5, tokens: 5, prompt: 529 },
        { at: 4927, kind: 'request', node: 0, adapter: 9, tokens: 1, prompt: 1212 },
        { at: 4931, kind: 'request', node: 1, adapter: 4, tokens: 1, prompt: 1738 },
        { at: 5050, kind: 'request', node: 0, adapter: 7, tokens: 6, prompt: 1900 },
        { at: 5061, kind: 'request', node: 0, adapter: 3, tokens: 6, prompt: 552 },
        { at: 5478, kind: 'request', node: 1, adapter: 4, tokens: 3, prompt: 170 },
        { at: 5662, kind: 'request', node: 1, adapter: 5, tokens: 5, prompt: 540 },
      ],
    );
  }, 30_000);

  // Seed 848577 (--keep 0,...,15), a break: replica-0 (limit 2) held chat; request 8's load of team,a
  // failed at once, and the store granted request 11's unload of chat for bio on 1 of 2 (fixed as
  // 708211). As shrunk, request 12's unload of team for fin (granted at 2,599 ms), the same way.
  it('seed 848577: no make-room unload on a replica with a slot free', async () => {
    await holds(
      848577,
      {
        nodes: 3,
        replicas: 2,
        maxLoadedAdapters: 2,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math', 'law', 'med', 'fin', 'bio'],
        loadMs: 800,
        decodeMsPerStep: 100,
        coldLoadsPerMinute: 1000,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 1000,
        spanMs: 2000,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 500,
      },
      [
        { at: 110, kind: 'request', node: 2, adapter: 3, tokens: 2, prompt: 585 },
        { at: 124, kind: 'request', node: 1, adapter: 4, tokens: 5, prompt: 1553 },
        { at: 400, kind: 'request', node: 0, adapter: 8, tokens: 2, prompt: 820 },
        { at: 480, kind: 'request', node: 0, adapter: 4, tokens: 5, prompt: 428 },
        { at: 610, kind: 'request', node: 1, adapter: 1, tokens: 5, prompt: 1254 },
        { at: 835, kind: 'request', node: 0, adapter: 1, tokens: 2, prompt: 979 },
        { at: 874, kind: 'request', node: 1, adapter: 2, tokens: 3, prompt: 1144 },
        { at: 980, kind: 'request', node: 2, adapter: -1, tokens: 4, prompt: 1451 },
        { at: 1117, kind: 'load-fail', replica: 0, count: 1, failure: 'rank' },
        { at: 1293, kind: 'request', node: 1, adapter: 0, tokens: 5, prompt: 540 },
        { at: 1301, kind: 'request', node: 1, adapter: 10, tokens: 5, prompt: 1900 },
        { at: 1343, kind: 'request', node: 2, adapter: 3, tokens: 6, prompt: 1191 },
        { at: 1366, kind: 'skew', node: 0, ms: -238 },
        { at: 1464, kind: 'request', node: 1, adapter: 9, tokens: 2, prompt: 658 },
        { at: 1561, kind: 'request', node: 2, adapter: 0, tokens: 3, prompt: 1829 },
      ],
    );
  }, 30_000);

  // Seed 223260 (--keep 0,...,14,20), a break on a build of main before room-grant (8286efe), found
  // by a sweep of a stale dist: replica-1 (limit 2) held math; request 2 (team) read it full while
  // node 1 loaded code there (math + code, 2 of 2); code's load failed and node 1's end ran at
  // 2,568 ms; node 1's unload of math for team, sent 151 ms later on the same link, was granted on
  // 1 of 2 (2,720 ms): 0 of 2, one load to come. No call passed another: with each link in order and
  // the store's free-slot refusal reverted it breaks the same way; the store now refuses it and team
  // loads into the slot.
  it('seed 223260: no make-room unload after a failed load gave its slot back, the link in order', async () => {
    await holds(
      223260,
      {
        nodes: 3,
        replicas: 2,
        maxLoadedAdapters: 2,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math', 'law'],
        loadMs: 200,
        decodeMsPerStep: 100,
        coldLoadsPerMinute: 6,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 0,
        spanMs: 6000,
        staticAdapters: ['sql,chat'],
        queueTimeoutMs: 4000,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 500,
      },
      [
        { at: 233, kind: 'request', node: 1, adapter: 6, tokens: 4, prompt: 701 },
        { at: 308, kind: 'slow', node: 1, ms: 2250, slowMs: 199 },
        { at: 312, kind: 'request', node: 1, adapter: 3, tokens: 4, prompt: 1636 },
        { at: 414, kind: 'request', node: 1, adapter: -1, tokens: 3, prompt: 1421 },
        { at: 458, kind: 'request', node: 0, adapter: 0, tokens: 2, prompt: 381 },
        { at: 461, kind: 'request', node: 2, adapter: 8, tokens: 6, prompt: 1044 },
        { at: 762, kind: 'request', node: 1, adapter: 5, tokens: 2, prompt: 412 },
        { at: 1008, kind: 'request', node: 0, adapter: 2, tokens: 118, prompt: 730 },
        { at: 1040, kind: 'request', node: 2, adapter: 0, tokens: 3, prompt: 1925 },
        { at: 1190, kind: 'request', node: 2, adapter: 6, tokens: 3, prompt: 1671 },
        { at: 1210, kind: 'request', node: 1, adapter: 5, tokens: 6, prompt: 1642 },
        { at: 1351, kind: 'request', node: 1, adapter: 0, tokens: 4, prompt: 1717 },
        { at: 1466, kind: 'replica-outage', replica: 1, ms: 1175, mode: 'error500' },
        { at: 1524, kind: 'request', node: 0, adapter: 3, tokens: 3, prompt: 1720 },
        { at: 1538, kind: 'request', node: 0, adapter: 3, tokens: 5, prompt: 952 },
        { at: 5357, kind: 'request', node: 1, adapter: 0, tokens: 5, prompt: 1013 },
      ],
    );
  }, 30_000);

  // Seed 885877 (--keep 0,1,2,3,4,5,6,7,9,10,11,14,15), a false alarm: node 2's link was slowed
  // (replies 1,744 ms late, past the 500 ms timeout) as it asked for sql's slot on replica-0 (chat
  // loaded, 1 of 2). The store granted it (861 ms), the call timed out, the node loaded alone (the
  // load failed) and never ended a lock it knew nothing of: the store counted sql loading until
  // the lock's TTL (8,861 ms). Request 8 for med read chat + sql = 2 of 2 and unloaded chat (granted
  // at 6,106 ms): 0 of 2. The check now records a slot the store granted whose answer was lost.
  it('seed 885877: a load slot the store granted whose answer a slowed link lost counts until its TTL', async () => {
    await holds(
      885877,
      {
        nodes: 3,
        replicas: 2,
        maxLoadedAdapters: 2,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math', 'law', 'med'],
        loadMs: 200,
        decodeMsPerStep: 100,
        coldLoadsPerMinute: 6,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 1000,
        spanMs: 2000,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 2000,
      },
      [
        { at: 52, kind: 'request', node: 0, adapter: 1, tokens: 4, prompt: 1448 },
        { at: 220, kind: 'request', node: 2, adapter: 6, tokens: 2, prompt: 1597 },
        { at: 263, kind: 'request', node: 1, adapter: 1, tokens: 6, prompt: 1984 },
        { at: 550, kind: 'load-fail', replica: 0, count: 3, failure: 'rank' },
        { at: 586, kind: 'request', node: 2, adapter: 6, tokens: 4, prompt: 922 },
        { at: 700, kind: 'request', node: 1, adapter: 7, tokens: 3, prompt: 1342 },
        { at: 853, kind: 'request', node: 2, adapter: 0, tokens: 3, prompt: 1444 },
        { at: 859, kind: 'slow', node: 2, ms: 598, slowMs: 1744 },
        { at: 977, kind: 'request', node: 2, adapter: 6, tokens: 6, prompt: 1851 },
        { at: 1047, kind: 'scrape', replica: 0, ms: 3713, mode: 'garbled' },
        { at: 1135, kind: 'request', node: 0, adapter: 8, tokens: 5, prompt: 1862 },
        { at: 1910, kind: 'replica-outage', replica: 1, ms: 1712, mode: 'hang' },
        { at: 1980, kind: 'request', node: 1, adapter: 7, tokens: 1, prompt: 593 },
      ],
    );
  }, 30_000);
});

describe('a replica seen down gets no request: a node back from deciding alone hands on what it polled up', () => {
  // Seed 503368 (--keep 7,9,10,12,13,16,17,21,22,23; the router's): node 2 polls replica-0 down in
  // its restart (628-1,440 ms), the last poll Redis hears before the partition (1,006-3,545 ms);
  // every node then polls replica-0 up and replica-1 down (500s from 1,984 ms) in its local store
  // alone. Back on Redis (~4,060-4,080 ms) the nodes pushed their downs but not their ups: Redis
  // read both down, the health filter failed open, and a request waiting for room went to replica-1
  // (full schedule: node 0 at 4,085 ms, 2,101 ms into its outage; this one: node 2 at 4,076 ms,
  // 2,092 ms). The ups are handed on too now.
  it('seed 503368: a replica polled up while cut off reads up once back, not the down Redis heard before', async () => {
    await holds(
      503368,
      {
        nodes: 3,
        replicas: 2,
        maxLoadedAdapters: 1,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math', 'law', 'med', 'fin'],
        loadMs: 1500,
        decodeMsPerStep: 50,
        coldLoadsPerMinute: 1000,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 0,
        spanMs: 4073,
        queueTimeoutMs: 4000,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 500,
      },
      [
        { at: 573, kind: 'flushall' },
        { at: 573, kind: 'request', node: 0, adapter: 8, tokens: 1, prompt: 1576 },
        { at: 628, kind: 'replica-restart', replica: 0, downMs: 812 },
        { at: 897, kind: 'request', node: 2, adapter: 8, tokens: 6, prompt: 1904 },
        { at: 1006, kind: 'partition', node: -1, ms: 2539 },
        { at: 1267, kind: 'request', node: 2, adapter: 0, tokens: 2, prompt: 1090 },
        { at: 1318, kind: 'request', node: 0, adapter: 0, tokens: 2, prompt: 1656 },
        { at: 1984, kind: 'replica-outage', replica: 1, ms: 2782, mode: 'error500' },
        { at: 1999, kind: 'slow', node: 2, ms: 232, slowMs: 1025 },
        { at: 2766, kind: 'request', node: 1, adapter: 1, tokens: 1, prompt: 1657 },
      ],
    );
  }, 30_000);
});

describe('static adapters stay: an up verdict handed on claims no poll', () => {
  // Seed 705202 (--keep 0,1,2,6,7,8,9,10; the router's, with the 503368 fix): after the FLUSHALL at
  // 658 ms node 1 registered its replicas again and handed on its up verdict on replica-0 (polled at
  // 232 ms). The emptied record read as checked at 665 ms, so node 2's request for `sql,chat` at
  // 841 ms was routed without the poll a record never read gets first, and loaded `sql,chat` there
  // before any registry read. The first read (966 ms) came during the load (slowed to 3,867 ms),
  // which failed; the next read took `sql,chat` as a router's load and a trim unloaded it at
  // 4,924 ms. A verdict now changes the health only, not when the record was polled, and a reclaim
  // after an emptied state hands on no up verdict at all (only recovery after deciding alone does).
  it('seed 705202: a record emptied by a FLUSHALL is polled before a router routes on it, whatever the reclaim hands on', async () => {
    await holds(
      705202,
      {
        nodes: 3,
        replicas: 2,
        maxLoadedAdapters: 1,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a'],
        loadMs: 200,
        decodeMsPerStep: 50,
        coldLoadsPerMinute: 1000,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 0,
        spanMs: 4158,
        staticAdapters: ['sql,chat'],
        queueTimeoutMs: 4000,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 2000,
      },
      [
        { at: 229, kind: 'request', node: 1, adapter: -1, tokens: 2, prompt: 610 },
        { at: 410, kind: 'slow-load', replica: 0, ms: 2769, slowMs: 3644 },
        { at: 524, kind: 'slow-path', node: 1, replica: 1, ms: 243, hopMs: 13 },
        { at: 655, kind: 'request', node: 1, adapter: 4, tokens: 4, prompt: 709 },
        { at: 658, kind: 'flushall' },
        { at: 658, kind: 'slow-path', node: 1, replica: 0, ms: 1295, hopMs: 2365 },
        { at: 658, kind: 'request', node: 1, adapter: 2, tokens: 3, prompt: 989 },
        { at: 841, kind: 'request', node: 2, adapter: 5, tokens: 4, prompt: 1175 },
      ],
    );
  }, 30_000);
});

describe('a replica seen down gets no request: every replica seen down by the routing node', () => {
  // Seed 100813 (--keep 5,9,10,14,19,20,21): node 1's path to replica-0 is slow (1,776 ms each way
  // from 206 ms, then 2,107 ms from 1,171 ms), so every poll it makes there times out; replica-1
  // answers 500 from 839 ms and node 1 polls it down at 1,039 ms; every node is cut off from Redis
  // from 1,507 ms (node 1 decides alone from 2,154 ms). Its request for `sql,chat` (1,887 ms) waits
  // for a poll of replica-0, never read: that poll times out at 3,354 ms, the second in a row, and
  // node 1 marks replica-0 down too (`unhealthy_timeouts`). Every replica seen down, the health
  // filter fails open and the request goes to replica-1. The check took replica-0 for seen up (up
  // and scraped, by the replica's own state), not asking whether this node's polls could see it so.
  it("seed 100813: failing open holds when the node's own polls of the other replica timed out twice in a row", async () => {
    await holds(
      100813,
      {
        nodes: 3,
        replicas: 2,
        maxLoadedAdapters: 1,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math', 'law', 'med'],
        loadMs: 800,
        decodeMsPerStep: 100,
        coldLoadsPerMinute: 1000,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 1000,
        spanMs: 3706,
        staticAdapters: ['sql,chat'],
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 2000,
      },
      [
        { at: 206, kind: 'slow-path', node: 1, replica: 0, ms: 1354, hopMs: 1776 },
        { at: 652, kind: 'request', node: 1, adapter: 1, tokens: 5, prompt: 1530 },
        { at: 839, kind: 'replica-outage', replica: 1, ms: 3391, mode: 'error500' },
        { at: 1171, kind: 'slow-path', node: 1, replica: 0, ms: 2255, hopMs: 2107 },
        { at: 1507, kind: 'partition', node: -1, ms: 2569 },
        { at: 1854, kind: 'request', node: 1, adapter: 3, tokens: 3, prompt: 1004 },
        { at: 1887, kind: 'request', node: 1, adapter: 9, tokens: 4, prompt: 288 },
      ],
    );
  }, 30_000);
});

describe('no lease left open after quiescence: the settling waits for the replies a slow link owes', () => {
  // Seeds 30642 (--keep 0,5,9) and 26829 (--keep 1,2,3,4,6,7,14,15), found with each Redis link in
  // order (dst-fifo): a node's link is slow (2,919 ms, 2,817 ms added to each reply) while its
  // request runs; its calls time out, it decides alone, and the request's release waits to be
  // replayed. The link heals, but the replies it delayed are still owed (one TCP stream: ioredis's
  // `commandTimeout` only rejects the caller's promise and keeps the connection, lib/Command.ts,
  // tag v5.11.1), so each probe's ping, answered behind them, times out too, until the last comes
  // 2.9 s after the heal; the next probe then finds Redis and replays the release. The settling
  // ran SETTLE_MS from the heal and checked before that probe: no leak, the release was owed, not lost.
  it('seed 30642: a release replayed at the first probe after the slow link drained', async () => {
    await holds(
      30642,
      {
        nodes: 3,
        replicas: 3,
        maxLoadedAdapters: 2,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math'],
        loadMs: 800,
        decodeMsPerStep: 50,
        coldLoadsPerMinute: 1000,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 1000,
        spanMs: 2000,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 500,
      },
      [
        { at: 201, kind: 'process-restart', node: 0 },
        { at: 610, kind: 'request', node: 0, adapter: 3, tokens: 6, prompt: 731 },
        { at: 1117, kind: 'slow', node: 0, ms: 839, slowMs: 2919 },
      ],
    );
  }, 30_000);

  it('seed 26829: a release replayed at the first probe after the slow link drained', async () => {
    await holds(
      26829,
      {
        nodes: 3,
        replicas: 3,
        maxLoadedAdapters: 1,
        adapters: ['sql', 'chat', 'team,a', 'team'],
        loadMs: 800,
        decodeMsPerStep: 50,
        coldLoadsPerMinute: 6,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 1000,
        spanMs: 2000,
        staticAdapters: ['sql,chat'],
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 2000,
      },
      [
        { at: 191, kind: 'request', node: 0, adapter: 1, tokens: 1, prompt: 1894 },
        { at: 193, kind: 'request', node: 0, adapter: 0, tokens: 6, prompt: 113 },
        { at: 282, kind: 'request', node: 1, adapter: 4, tokens: 6, prompt: 1322 },
        { at: 291, kind: 'request', node: 0, adapter: 2, tokens: 2, prompt: 1243 },
        { at: 484, kind: 'request', node: 1, adapter: 3, tokens: 3, prompt: 319 },
        { at: 653, kind: 'request', node: 1, adapter: 1, tokens: 2, prompt: 736 },
        { at: 1788, kind: 'request', node: 0, adapter: 3, tokens: 6, prompt: 762 },
        { at: 1891, kind: 'slow', node: 1, ms: 1623, slowMs: 2817 },
      ],
    );
  }, 30_000);

  // Seed 202113 (a crowd and SLO classes; --keep 0,1,6-12,14-58): replica-0 restarts at 1,525 ms,
  // forgetting fin and med. Node 0's make-room unload of fin for sql, granted at 3,043 ms, holds its
  // lock while node 0's slowed path keeps the replica's word from coming (ended not done at 4,045
  // ms, never sent), so the first poll since the restart (applied at 3,133 ms) leaves fin
  // `unloading`. At 3,680 ms the store counts fin (its slot sql's room) and law, and grants
  // request 18 law's unload for geo: the replica, holding law alone, is left empty. Allowed (the
  // store counts what a restart forgot until a poll reads it, docs/reliability.md); the check took
  // the first poll after the restart for that one, though it leaves an adapter under a lock as it is.
  it("seed 202113: a restart's loss read by no poll while the forgotten adapter's unload lock held it", async () => {
    await holds(
      202113,
      {
        nodes: 3,
        replicas: 2,
        maxLoadedAdapters: 2,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math', 'law', 'med', 'fin', 'bio', 'geo'],
        loadMs: 200,
        decodeMsPerStep: 50,
        coldLoadsPerMinute: 1000,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 1000,
        spanMs: 7334,
        queueTimeoutMs: 2000,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 2000,
        maxNumSeqs: 4,
        sloClasses: [
          { name: 'interactive', ttft_ms: 1000, priority: 0 },
          { name: 'batch', ttft_ms: 2500, priority: -1 },
        ],
      },
      [
        { at: 101, kind: 'request', node: 2, adapter: 4, tokens: 2, prompt: 246, cls: 'interactive' },
        { at: 137, kind: 'request', node: 2, adapter: 9, tokens: 3, prompt: 1595, cls: 'interactive' },
        { at: 838, kind: 'request', node: 1, adapter: 2, tokens: 3, prompt: 1384, cls: 'batch' },
        { at: 839, kind: 'request', node: 1, adapter: 4, tokens: 3, prompt: 1396, cls: 'batch' },
        { at: 841, kind: 'request', node: 1, adapter: 0, tokens: 2, prompt: 411, cls: 'interactive' },
        { at: 841, kind: 'request', node: 1, adapter: 8, tokens: 1, prompt: 274, cls: 'batch' },
        { at: 842, kind: 'flushall' },
        { at: 842, kind: 'slow-path', node: 1, replica: 1, ms: 685, hopMs: 2112 },
        { at: 900, kind: 'request', node: 1, adapter: 7, tokens: 3, prompt: 206, cls: 'interactive' },
        { at: 985, kind: 'request', node: 1, adapter: 8, tokens: 2, prompt: 1841, cls: 'batch' },
        { at: 989, kind: 'request', node: 1, adapter: 4, tokens: 4, prompt: 132, cls: 'interactive' },
        { at: 1157, kind: 'request', node: 1, adapter: 0, tokens: 6, prompt: 1847 },
        { at: 1422, kind: 'slow-path', node: 0, replica: 0, ms: 2847, hopMs: 1094 },
        { at: 1525, kind: 'replica-restart', replica: 0, downMs: 1183 },
        { at: 1578, kind: 'request', node: 0, adapter: 4, tokens: 2, prompt: 182, cls: 'batch' },
        { at: 1694, kind: 'request', node: 2, adapter: 3, tokens: 6, prompt: 1308 },
        { at: 1731, kind: 'request', node: 0, adapter: 2, tokens: 6, prompt: 85, cls: 'interactive' },
        { at: 1751, kind: 'request', node: 0, adapter: 0, tokens: 60, prompt: 936, cls: 'batch' },
        { at: 2955, kind: 'request', node: 0, adapter: 5, tokens: 4, prompt: 1157 },
        { at: 3218, kind: 'request', node: 2, adapter: 7, tokens: 2, prompt: 416, cls: 'batch' },
        { at: 3503, kind: 'request', node: 1, adapter: 9, tokens: 22, prompt: 1528 },
        { at: 3666, kind: 'request', node: 2, adapter: 11, tokens: 1, prompt: 1049, cls: 'batch' },
        { at: 3890, kind: 'request', node: 0, adapter: 5, tokens: 5, prompt: 942, cls: 'interactive' },
        { at: 3904, kind: 'request', node: 1, adapter: 0, tokens: 30, prompt: 1701, cls: 'batch' },
        { at: 4046, kind: 'request', node: 1, adapter: 9, tokens: 56, prompt: 1769, cls: 'batch' },
        { at: 4082, kind: 'request', node: 0, adapter: 7, tokens: 1, prompt: 1171, cls: 'batch' },
        { at: 4219, kind: 'request', node: 2, adapter: 7, tokens: 1, prompt: 402 },
        { at: 4332, kind: 'request', node: 1, adapter: 3, tokens: 21, prompt: 1415, cls: 'interactive' },
        { at: 4470, kind: 'request', node: 1, adapter: 0, tokens: 33, prompt: 1234, cls: 'batch' },
        { at: 4553, kind: 'request', node: 1, adapter: -1, tokens: 58, prompt: 1039, cls: 'interactive' },
        { at: 4594, kind: 'request', node: 1, adapter: 3, tokens: 22, prompt: 1636, cls: 'interactive' },
        { at: 4598, kind: 'request', node: 1, adapter: 0, tokens: 33, prompt: 1844, cls: 'batch' },
        { at: 4681, kind: 'request', node: 1, adapter: 9, tokens: 29, prompt: 1929, cls: 'interactive' },
        { at: 4846, kind: 'request', node: 1, adapter: -1, tokens: 20, prompt: 1220, cls: 'interactive' },
        { at: 5086, kind: 'request', node: 1, adapter: 3, tokens: 20, prompt: 1719, cls: 'batch' },
        { at: 5100, kind: 'request', node: 1, adapter: 0, tokens: 45, prompt: 1821, cls: 'interactive' },
        { at: 5632, kind: 'request', node: 1, adapter: 0, tokens: 39, prompt: 1900, cls: 'interactive' },
        { at: 5718, kind: 'request', node: 1, adapter: 9, tokens: 25, prompt: 1665, cls: 'batch' },
        { at: 5821, kind: 'request', node: 1, adapter: 3, tokens: 32, prompt: 1936, cls: 'interactive' },
        { at: 5971, kind: 'request', node: 1, adapter: -1, tokens: 60, prompt: 1556, cls: 'batch' },
        { at: 6124, kind: 'request', node: 1, adapter: 0, tokens: 40, prompt: 1472, cls: 'batch' },
        { at: 6170, kind: 'request', node: 1, adapter: 3, tokens: 22, prompt: 1614, cls: 'batch' },
        { at: 6213, kind: 'request', node: 1, adapter: 3, tokens: 43, prompt: 1052, cls: 'batch' },
        { at: 6223, kind: 'request', node: 1, adapter: 9, tokens: 24, prompt: 1461 },
        { at: 6236, kind: 'request', node: 1, adapter: -1, tokens: 40, prompt: 1959, cls: 'batch' },
        { at: 6260, kind: 'request', node: 1, adapter: -1, tokens: 46, prompt: 1939, cls: 'interactive' },
        { at: 6310, kind: 'request', node: 1, adapter: 9, tokens: 38, prompt: 1376, cls: 'interactive' },
        { at: 6883, kind: 'request', node: 1, adapter: -1, tokens: 33, prompt: 1920, cls: 'interactive' },
        { at: 6949, kind: 'request', node: 1, adapter: 0, tokens: 39, prompt: 1280, cls: 'interactive' },
        { at: 7021, kind: 'request', node: 1, adapter: 3, tokens: 36, prompt: 1360, cls: 'interactive' },
        { at: 7107, kind: 'request', node: 1, adapter: 3, tokens: 28, prompt: 1837, cls: 'interactive' },
        { at: 7133, kind: 'request', node: 1, adapter: -1, tokens: 41, prompt: 1051, cls: 'interactive' },
        { at: 7195, kind: 'request', node: 1, adapter: 3, tokens: 54, prompt: 1238, cls: 'interactive' },
        { at: 7283, kind: 'request', node: 1, adapter: 9, tokens: 40, prompt: 1113 },
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

  // Seed 310213 (--keep 3,4,5,6,7,8,9,11,17,24): replica-1 registered `sql,chat` at its start
  // (/static/sql,chat); the name pattern also matches it. After the flushall, node 0 loads it there
  // at 2,343 ms, before any registry read; the replica hangs, the call fails, and the listing read
  // under the load's lock shows it: taken as this load landed (`loaded`), a trim unloaded it for
  // `team` at 5,541 ms. Now a listing at a path no configuration loads ends the load static, and
  // no registry read takes such an entry as a router's because something was loaded there
  // (1198992 broke it that way: its failed load of that name had set `everLoaded`).
  it('seed 310213: a failed load of a start-up adapter, listed after at its start-up path, is not a load', async () => {
    await holds(
      310213,
      {
        nodes: 3,
        replicas: 2,
        maxLoadedAdapters: 1,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a'],
        loadMs: 1500,
        decodeMsPerStep: 100,
        coldLoadsPerMinute: 1000,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 1000,
        spanMs: 3735,
        staticAdapters: ['sql,chat'],
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 500,
      },
      [
        { at: 234, kind: 'request', node: 2, adapter: 0, tokens: 5, prompt: 432 },
        { at: 235, kind: 'flushall' },
        { at: 235, kind: 'slow-path', node: 2, replica: 1, ms: 1453, hopMs: 2083 },
        { at: 235, kind: 'request', node: 2, adapter: 2, tokens: 3, prompt: 257 },
        { at: 295, kind: 'replica-outage', replica: 1, ms: 3208, mode: 'hang' },
        { at: 321, kind: 'request', node: 0, adapter: 0, tokens: 5, prompt: 1260 },
        { at: 336, kind: 'request', node: 0, adapter: 5, tokens: 1, prompt: 1388 },
        { at: 339, kind: 'request', node: 1, adapter: 1, tokens: 5, prompt: 1631 },
        { at: 1281, kind: 'flushall' },
        { at: 3060, kind: 'request', node: 1, adapter: 3, tokens: 3, prompt: 1162 },
      ],
    );
  }, 30_000);
});

describe("a record change on the same state keeps the retired runtime's leases counted", () => {
  // Seed 311722 (all 28 actions; so with --no-overload too; held on 1198992, whose schedule ran
  // otherwise): node 0 routes request 8 (`team`) to replica-1 at 1,228 ms on lease n0g0-5, its
  // path slowed (hop 2,421 ms). A lossy Sentinel switch at 1,421 ms loses the lease; a `redis`
  // record change to the same state at 1,730 ms retires node 0's runtime, request 8 still on its
  // way on the old one's lease. Node 0, partitioned 1,842-3,419 ms, recovers at 3,493 ms through
  // its new runtime, which took only its own leases again; at 3,553 ms node 1 unloads `team` from
  // replica-1 under request 8 (reached at 3,649 ms). A product break: a successor now takes its
  // draining predecessors' leases again too (FailoverFleetStore.restoreHeld).
  it('seed 311722: a lease lost in a switch is taken again by the successor of the runtime that took it', async () => {
    await holds(
      311722,
      {
        ...WORLD,
        loadMs: 200,
        decodeMsPerStep: 50,
        spanMs: 3699,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 2000,
      },
      [
        { at: 43, kind: 'request', node: 0, adapter: 3, tokens: 3, prompt: 708 },
        { at: 48, kind: 'request', node: 1, adapter: 6, tokens: 5, prompt: 1327 },
        { at: 122, kind: 'request', node: 1, adapter: 7, tokens: 3, prompt: 1481 },
        { at: 195, kind: 'request', node: 0, adapter: 2, tokens: 2, prompt: 538 },
        { at: 196, kind: 'request', node: 0, adapter: 6, tokens: 4, prompt: 1149 },
        { at: 197, kind: 'request', node: 0, adapter: 6, tokens: 4, prompt: 1338 },
        { at: 199, kind: 'flushall' },
        { at: 199, kind: 'slow-path', node: 0, replica: 1, ms: 1210, hopMs: 2421 },
        { at: 199, kind: 'request', node: 0, adapter: 10, tokens: 2, prompt: 1264 },
        { at: 496, kind: 'request', node: 0, adapter: 3, tokens: 3, prompt: 482 },
        { at: 549, kind: 'request', node: 0, adapter: 8, tokens: 1, prompt: 1120 },
        { at: 729, kind: 'request', node: 0, adapter: 5, tokens: 3, prompt: 626 },
        { at: 775, kind: 'request', node: 1, adapter: 1, tokens: 4, prompt: 1012 },
        { at: 1042, kind: 'slow-path', node: 2, replica: 1, ms: 1874, hopMs: 10 },
        { at: 1057, kind: 'scrape', replica: 1, ms: 1708, mode: 'garbled' },
        { at: 1383, kind: 'request', node: 0, adapter: 2, tokens: 6, prompt: 1540 },
        { at: 1421, kind: 'switch', lost: 6 },
        { at: 1494, kind: 'request', node: 2, adapter: 10, tokens: 1, prompt: 802 },
        { at: 1622, kind: 'slow', node: 2, ms: 491, slowMs: 1703 },
        { at: 1688, kind: 'request', node: 1, adapter: 3, tokens: 1, prompt: 528 },
        { at: 1713, kind: 'request', node: 2, adapter: 3, tokens: 6, prompt: 1277 },
        { at: 1730, kind: 'record-change', otherState: false, gapMs: 19 },
        { at: 1842, kind: 'partition', node: 0, ms: 1577 },
        { at: 2388, kind: 'request', node: 1, adapter: 9, tokens: 5, prompt: 606 },
        { at: 2994, kind: 'request', node: 1, adapter: 11, tokens: 5, prompt: 509 },
        { at: 3541, kind: 'request', node: 1, adapter: 9, tokens: 4, prompt: 1930 },
        { at: 3566, kind: 'request', node: 2, adapter: 11, tokens: 5, prompt: 54 },
        { at: 3662, kind: 'request', node: 2, adapter: 9, tokens: 3, prompt: 609 },
      ],
    );
  }, 30_000);

  // Seed 487008 (budget 3, node_ttl_ms 500: a share of 1 of three nodes; it does not shrink: any
  // action dropped reorders the rest). A `redis` record change to other state at 508 ms moves node
  // 2 to a new runtime; its old one still holds request 1 (`chat`, held since 306 ms). Redis is cut
  // off from every node 1,326-1,832 ms. At 1,824 ms the old runtime, deciding alone, grants request 1
  // from the node's share (none of it spent) and carries the grant to the new runtime, whose add
  // to the new state goes into the partition; the request waits for it. Redis, back, grants the new
  // runtime three more (1,885, 1,893, 2,006 ms): its window never had the add, which times out at
  // 2,324 ms, and request 1's load call goes out then: `n2g0 sent 4 load calls in 60 s (budget 3),
  // the last deciding alone`. The node granted alone only its share (the fleet's bound, the shared
  // window's budget plus the shares, holds); the check counted Redis's later grants against a grant
  // made before them (failing on main for that reason, not a bug in src/). It now leaves out
  // of a call granted alone the calls Redis granted after it.
  it('seed 487008: a load granted alone within the share, sent after Redis granted more, holds', async () => {
    await holds(
      487008,
      {
        ...WORLD,
        replicas: 2,
        maxLoadedAdapters: 2,
        loadMs: 200,
        decodeMsPerStep: 50,
        coldLoadsPerMinute: 3,
        ttftSloMs: 0,
        spanMs: 6000,
        staticAdapters: ['sql,chat'],
        queueTimeoutMs: 4000,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 500,
      },
      [
        { at: 269, kind: 'replica-outage', replica: 0, ms: 810, mode: 'hang' },
        { at: 306, kind: 'request', node: 2, adapter: 1, tokens: 4, prompt: 575 },
        { at: 421, kind: 'request', node: 2, adapter: 9, tokens: 5, prompt: 692 },
        { at: 508, kind: 'record-change', otherState: true, gapMs: 15 },
        { at: 523, kind: 'request', node: 0, adapter: 0, tokens: 4, prompt: 1376 },
        { at: 529, kind: 'request', node: 2, adapter: 2, tokens: 96, prompt: 1270 },
        { at: 761, kind: 'request', node: 1, adapter: 7, tokens: 4, prompt: 1840 },
        { at: 871, kind: 'request', node: 2, adapter: 3, tokens: 5, prompt: 1720 },
        { at: 997, kind: 'request', node: 1, adapter: 1, tokens: 2, prompt: 1643 },
        { at: 1004, kind: 'request', node: 0, adapter: 5, tokens: 5, prompt: 59 },
        { at: 1130, kind: 'request', node: 2, adapter: 1, tokens: 5, prompt: 1538 },
        { at: 1162, kind: 'request', node: 1, adapter: 4, tokens: 54, prompt: 1789 },
        { at: 1326, kind: 'partition', node: -1, ms: 506 },
        { at: 1401, kind: 'slow-path', node: 1, replica: 0, ms: 1000, hopMs: 26 },
        { at: 1655, kind: 'request', node: 0, adapter: 5, tokens: 5, prompt: 729 },
        { at: 1781, kind: 'request', node: 1, adapter: 7, tokens: 3, prompt: 1674 },
        { at: 1914, kind: 'request', node: 0, adapter: 12, tokens: 29, prompt: 824 },
        { at: 1993, kind: 'request', node: 2, adapter: 5, tokens: 3, prompt: 1400 },
        { at: 4808, kind: 'request', node: 2, adapter: 9, tokens: 2, prompt: 1535 },
        { at: 5116, kind: 'request', node: 2, adapter: 1, tokens: 4, prompt: 366 },
        { at: 5187, kind: 'request', node: 1, adapter: 3, tokens: 4, prompt: 451 },
        { at: 5331, kind: 'request', node: 1, adapter: 1, tokens: 4, prompt: 91 },
        { at: 5752, kind: 'request', node: 2, adapter: 5, tokens: 1, prompt: 980 },
      ],
    );
  }, 30_000);
});

describe('a failed load is not tried again within the backoff: unless its sender then read it listed', () => {
  // Seed 436555 (--keep 2,3,4,5,8,9,11,14; drawn with the overload shapes, `--no-overload` draws another
  // schedule): node 0's load of `team` on replica-2 (sent at 832 ms) lands at 2,334 ms. Redis,
  // restarted empty at 1,949 ms, is down until 2,474: node 1, deciding alone, sends the same load at
  // 2,197 ms, and replica-2, failing its next loads from 1,665 ms, answers it 500 (an engine failure) at
  // 3,697 ms. Node 1 reads /v1/models at once, finds `team` listed and takes its load as landed
  // (docs/reliability.md, "A load whose answer is lost is the replica's to say too"): no backoff. Its
  // request, on a fresh lease (the old one half `lease_max_age_ms` old), loads it again at 3,714 ms and is
  // answered "already loaded". The check took the 500 for a failure the router backs off from.
  it('seed 436555: a failed load its sender then read listed on the replica starts no backoff', async () => {
    await holds(
      436555,
      {
        nodes: 3,
        replicas: 3,
        maxLoadedAdapters: 1,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a'],
        loadMs: 1500,
        decodeMsPerStep: 100,
        coldLoadsPerMinute: 1000,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 0,
        spanMs: 2000,
        queueTimeoutMs: 4000,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 500,
        sloClasses: [
          { name: 'interactive', ttft_ms: 1000, priority: 0 },
          { name: 'batch', ttft_ms: 2500, priority: -1 },
        ],
      },
      [
        { at: 810, kind: 'request', node: 0, adapter: 3, tokens: 5, prompt: 1566, cls: 'interactive' },
        { at: 1018, kind: 'request', node: 1, adapter: 1, tokens: 5, prompt: 753, cls: 'batch' },
        { at: 1137, kind: 'request', node: 2, adapter: 4, tokens: 4, prompt: 160, cls: 'batch' },
        { at: 1147, kind: 'request', node: 2, adapter: 2, tokens: 3, prompt: 508, cls: 'interactive' },
        { at: 1440, kind: 'request', node: 1, adapter: 3, tokens: 3, prompt: 739, cls: 'batch' },
        { at: 1459, kind: 'request', node: 0, adapter: -1, tokens: 3, prompt: 1141, cls: 'interactive' },
        { at: 1665, kind: 'load-fail', replica: 2, count: 4, failure: 'engine' },
        { at: 1949, kind: 'redis-restart', empty: true, downMs: 525 },
      ],
    );
  }, 30_000);
});

describe('a replica seen down gets no request: decisions read after an emptied state wait for the reclaim', () => {
  // Seed 542328 (--keep 3,...,34,42,...,57 of 58: a crowd of requests at node 1, no SLO classes; the
  // router's): replica-2 answers 500 from 269 ms, every node polls it down (node 1 at 1,087 ms), and node
  // 1 holds crowd requests for the TTFT objective. A FLUSHALL at 1,877 ms; node 0 finds it (1,895) and
  // registers every replica again. Node 1's held base-model request reads its views at 1,901 ms: every
  // replica `unknown`, and the reply says the state was emptied. Node 1 reclaims (registers, hands on
  // its downs: replica-2 at 1,916) and then decided on the views read before, replica-2, proxied there
  // at 1,924 ms. In the full seed, held requests read the views while node 1's reclaim was under way
  // (1,961 ms) and one was proxied to replica-2 at 1,987 ms. Either read is now made again after it.
  it('seed 542328: views read while the node reclaims an emptied state are read again once its downs are handed on', async () => {
    await holds(
      542328,
      {
        nodes: 3,
        replicas: 3,
        maxLoadedAdapters: 4,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math', 'law', 'med', 'fin'],
        loadMs: 1500,
        decodeMsPerStep: 100,
        coldLoadsPerMinute: 1000,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 1000,
        spanMs: 4415,
        queueTimeoutMs: 2000,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 500,
        maxNumSeqs: 4,
      },
      [
        { at: 269, kind: 'replica-outage', replica: 2, ms: 2254, mode: 'error500' },
        { at: 360, kind: 'request', node: 0, adapter: 0, tokens: 3, prompt: 1715 },
        { at: 565, kind: 'switch', lost: 3 },
        { at: 741, kind: 'request', node: 2, adapter: 0, tokens: 6, prompt: 1816 },
        { at: 846, kind: 'replica-outage', replica: 0, ms: 714, mode: 'error500' },
        { at: 939, kind: 'request', node: 1, adapter: 3, tokens: 4, prompt: 1211 },
        { at: 1027, kind: 'request', node: 1, adapter: 2, tokens: 52, prompt: 1061 },
        { at: 1044, kind: 'request', node: 2, adapter: 0, tokens: 1, prompt: 401 },
        { at: 1046, kind: 'request', node: 1, adapter: -1, tokens: 57, prompt: 1174 },
        { at: 1145, kind: 'request', node: 1, adapter: -1, tokens: 45, prompt: 1815 },
        { at: 1153, kind: 'request', node: 1, adapter: 6, tokens: 31, prompt: 1653 },
        { at: 1230, kind: 'request', node: 2, adapter: 8, tokens: 6, prompt: 1246 },
        { at: 1231, kind: 'request', node: 2, adapter: -1, tokens: 1, prompt: 438 },
        { at: 1245, kind: 'request', node: 1, adapter: 6, tokens: 36, prompt: 1540 },
        { at: 1302, kind: 'request', node: 1, adapter: -1, tokens: 55, prompt: 1776 },
        { at: 1354, kind: 'request', node: 1, adapter: -1, tokens: 47, prompt: 1906 },
        { at: 1354, kind: 'request', node: 1, adapter: 6, tokens: 28, prompt: 1725 },
        { at: 1417, kind: 'request', node: 1, adapter: 1, tokens: 2, prompt: 1420 },
        { at: 1510, kind: 'request', node: 1, adapter: 2, tokens: 59, prompt: 1833 },
        { at: 1574, kind: 'request', node: 1, adapter: 9, tokens: 41, prompt: 1852 },
        { at: 1663, kind: 'request', node: 1, adapter: -1, tokens: 36, prompt: 1832 },
        { at: 1736, kind: 'request', node: 1, adapter: 9, tokens: 54, prompt: 1587 },
        { at: 1739, kind: 'request', node: 1, adapter: -1, tokens: 47, prompt: 1153 },
        { at: 1752, kind: 'request', node: 1, adapter: 6, tokens: 26, prompt: 1887 },
        { at: 1778, kind: 'request', node: 1, adapter: 6, tokens: 43, prompt: 1807 },
        { at: 1814, kind: 'request', node: 1, adapter: -1, tokens: 49, prompt: 1166 },
        { at: 1821, kind: 'request', node: 1, adapter: 6, tokens: 51, prompt: 1240 },
        { at: 1832, kind: 'request', node: 0, adapter: 4, tokens: 2, prompt: 889 },
        { at: 1850, kind: 'request', node: 1, adapter: 9, tokens: 43, prompt: 1265 },
        { at: 1877, kind: 'flushall' },
        { at: 1956, kind: 'request', node: 1, adapter: 6, tokens: 5, prompt: 646 },
        { at: 2034, kind: 'request', node: 1, adapter: 9, tokens: 55, prompt: 1293 },
        { at: 2709, kind: 'request', node: 1, adapter: 2, tokens: 38, prompt: 1663 },
        { at: 2776, kind: 'request', node: 1, adapter: -1, tokens: 32, prompt: 1051 },
        { at: 2806, kind: 'request', node: 1, adapter: 6, tokens: 32, prompt: 1300 },
        { at: 2859, kind: 'request', node: 1, adapter: 6, tokens: 40, prompt: 1499 },
        { at: 3104, kind: 'request', node: 1, adapter: 2, tokens: 39, prompt: 1442 },
        { at: 3149, kind: 'request', node: 1, adapter: 2, tokens: 27, prompt: 1410 },
        { at: 3154, kind: 'request', node: 1, adapter: 2, tokens: 45, prompt: 1988 },
        { at: 3195, kind: 'request', node: 1, adapter: 9, tokens: 32, prompt: 1338 },
        { at: 3558, kind: 'request', node: 1, adapter: 6, tokens: 45, prompt: 1206 },
        { at: 3629, kind: 'request', node: 1, adapter: -1, tokens: 39, prompt: 1231 },
        { at: 3650, kind: 'request', node: 1, adapter: 6, tokens: 60, prompt: 1594 },
        { at: 3653, kind: 'request', node: 1, adapter: 2, tokens: 27, prompt: 1614 },
        { at: 3687, kind: 'request', node: 1, adapter: -1, tokens: 54, prompt: 1116 },
        { at: 3742, kind: 'request', node: 1, adapter: -1, tokens: 36, prompt: 1006 },
        { at: 3921, kind: 'request', node: 1, adapter: 9, tokens: 49, prompt: 1070 },
        { at: 4344, kind: 'request', node: 1, adapter: 6, tokens: 35, prompt: 1613 },
      ],
    );
  }, 30_000);
});

describe('a request makes room for its load and no more: a lock end a retired runtime made alone', () => {
  // Seed 662665 (--keep 0,1,2,3,4,5,6,7): a same-state record change (377 ms) retires node 1's runtime
  // while its request for `bio` is granted replica-1's load slot (758 ms); a Sentinel switch that loses
  // nothing (805 ms) cuts the old runtime off, so it decides alone, and the replica fails the load
  // (960 ms). The old runtime recorded the lock's end but only locally, and closed: Redis kept `bio`
  // `loading` beside `team,a` until the lock's TTL, and node 0's request for `law` unloaded `team,a` to
  // make room on a replica holding nothing else. Two fixes: the successor adopts and sends the old
  // runtime's lock ends (failover-store.ts `adopt`), and the model keeps, across a switch, the locks
  // the promoted replica still holds (it ended them all, so the check counted `bio` as gone).
  it('seed 662665: the lock ends a retired runtime made alone are sent by its successor; a switch keeps the locks it keeps', async () => {
    await holds(
      662665,
      {
        nodes: 3,
        replicas: 2,
        maxLoadedAdapters: 2,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math', 'law', 'med', 'fin', 'bio', 'geo'],
        loadMs: 200,
        decodeMsPerStep: 100,
        coldLoadsPerMinute: 1000,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 0,
        spanMs: 2000,
        queueTimeoutMs: 4000,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 500,
      },
      [
        { at: 32, kind: 'request', node: 1, adapter: 2, tokens: 6, prompt: 1083 },
        { at: 318, kind: 'request', node: 1, adapter: 3, tokens: 1, prompt: 171 },
        { at: 377, kind: 'record-change', otherState: false, gapMs: 447 },
        { at: 405, kind: 'load-fail', replica: 1, count: 1, failure: 'engine' },
        { at: 490, kind: 'request', node: 0, adapter: 11, tokens: 5, prompt: 484 },
        { at: 747, kind: 'request', node: 1, adapter: 10, tokens: 1, prompt: 680 },
        { at: 805, kind: 'switch', lost: 0 },
        { at: 977, kind: 'request', node: 0, adapter: 7, tokens: 1, prompt: 1134 },
      ],
    );
  }, 30_000);
});

describe('an unload record a wipe lost, and a load decided alone', () => {
  // Seed 741908 (--keep 0,3,4,5,10,20): node 1 unloads `med` from replica-1 (granted at 660.9 ms) over
  // a slow path (460 ms, 349 ms each way); FLUSHALL at 832 ms empties the shared state before replica-1
  // drops `med` (1,363 ms), and the poll writes back what replica-1 still listed. Node 1's request of
  // 1,485 ms decided on that state and got a 404: a wipe loses the unload's record as a rollback does
  // (answer-check.ts `rolledBack` reads every reset, not only restores from an older copy). That
  // excuses only another process's unload: node 1 knows its own call under way without Redis, and
  // keeps its decisions off it (src/adapters/own-unloads.ts): its request now waits for the unload.
  it('seed 741908: a node whose unload record a FLUSHALL wiped before the drop does not route onto its own unload', async () => {
    await holds(
      741908,
      {
        nodes: 3,
        replicas: 2,
        maxLoadedAdapters: 1,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math', 'law', 'med', 'fin'],
        loadMs: 200,
        decodeMsPerStep: 50,
        coldLoadsPerMinute: 1000,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 1000,
        spanMs: 4332,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 2000,
      },
      [
        { at: 96, kind: 'request', node: 0, adapter: 8, tokens: 5, prompt: 1469 },
        { at: 505, kind: 'request', node: 0, adapter: 9, tokens: 4, prompt: 969 },
        { at: 517, kind: 'request', node: 1, adapter: 4, tokens: 4, prompt: 630 },
        { at: 638, kind: 'slow-path', node: 1, replica: 1, ms: 460, hopMs: 349 },
        { at: 832, kind: 'flushall' },
        { at: 1485, kind: 'request', node: 1, adapter: 8, tokens: 3, prompt: 146 },
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

describe('no unload of a busy adapter: a lease reclaimed by age on the wire', () => {
  // Seed 7753 (the default options, the sweep at the answers' tally): node 2's request of 549 ms for
  // `a` waited for its load (node 1's, landed 3,413 ms) on a lease taken at 1,907 ms, was proxied at
  // 3,417 ms (its lease 1.5 s old: no fresh one, under half lease_max_age_ms) over a slow path of
  // 2,936 ms each way, and reached replica-1 at 6,353 ms. Its lease, renewed by no word of the
  // replica (the request was on the wire), was reclaimed by age at 5,907 ms (lease_max_age_ms 4 s),
  // and node 0 unloaded `a` at 5,983 ms to make room for `math`. docs/reliability.md: a lease not
  // renewed for lease_max_age_ms is reclaimed and its adapter may be unloaded; the default 600 s is
  // past any hop. The busy check now leaves out a request on its way whose lease was reclaimed by
  // age. Reached since the fix of seed 2937 (src/adapters/room-queue.ts): before it, the same request
  // waited until 7,527 ms and was refused 429.
  it(
    'seed 7753: a request on its way longer than its lease had left holds its adapter no more',
    () =>
      holds(
        7753,
        {
          nodes: 3,
          replicas: 2,
          maxLoadedAdapters: 1,
          adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math'],
          loadMs: 1500,
          decodeMsPerStep: 50,
          coldLoadsPerMinute: 6,
          leaseMaxAgeMs: 4000,
          ttftSloMs: 1000,
          spanMs: 2000,
          upstreamTimeoutMs: 5000,
          nodeTtlMs: 2000,
        },
        [
          { at: 31, kind: 'replica-restart', replica: 0, downMs: 381 },
          { at: 95, kind: 'request', node: 0, adapter: 5, tokens: 2, prompt: 602 },
          { at: 129, kind: 'request', node: 1, adapter: 5, tokens: 3, prompt: 1211 },
          { at: 279, kind: 'request', node: 1, adapter: 1, tokens: 2, prompt: 1267 },
          { at: 480, kind: 'request', node: 2, adapter: 1, tokens: 3, prompt: 323 },
          { at: 549, kind: 'request', node: 2, adapter: 4, tokens: 5, prompt: 836 },
          { at: 588, kind: 'request', node: 1, adapter: 6, tokens: 3, prompt: 182 },
          { at: 814, kind: 'skew', node: 2, ms: -187 },
          { at: 957, kind: 'request', node: 0, adapter: 4, tokens: 6, prompt: 20 },
          { at: 1116, kind: 'request', node: 2, adapter: 6, tokens: 4, prompt: 862 },
          { at: 1179, kind: 'request', node: 0, adapter: 6, tokens: 21, prompt: 526 },
          { at: 1192, kind: 'request', node: 1, adapter: 4, tokens: 6, prompt: 1839 },
          { at: 1299, kind: 'request', node: 0, adapter: -1, tokens: 2, prompt: 74 },
          { at: 1373, kind: 'slow-path', node: 2, replica: 1, ms: 2637, hopMs: 2936 },
          { at: 1411, kind: 'request', node: 0, adapter: -1, tokens: 4, prompt: 74 },
          { at: 1602, kind: 'request', node: 0, adapter: 3, tokens: 6, prompt: 142 },
          { at: 1613, kind: 'request', node: 0, adapter: 0, tokens: 5, prompt: 798 },
        ],
      ),
    30_000,
  );
});

describe('a bounded class joins a replica at its bound only after its wait: a base-model request outliving lease_max_age_ms', () => {
  // Seed 834440 (--keep 0,1,3,4,5,8,10,11,12,13,14,15,16,17,18,19,24,25,27,28,29,36,37,41,42,43,44,45,46,47,48,56,57,63):
  // node 1's base-model request 21, sent to replica-0 at 2,060 ms, runs past `lease_max_age_ms`
  // (4 s; 54 tokens at 100 ms a step). Its lease, no adapter's, was never renewed by the polls
  // that found the replica busy: reclaimed at about 6,060 ms while it ran. Node 0's batch request
  // 33 (`max_in_flight` 3), held at the bound since 4,929 ms, read 2 in flight at 6,112 ms (30 and
  // 31) and joined as the fourth. Polls now renew base-model leases while the replica runs or
  // queues requests (src/fleet/memory-leases.ts, the residency script).
  it('seed 834440: a base-model request longer than lease_max_age_ms stays in flight', async () => {
    await holds(
      834440,
      {
        nodes: 3,
        replicas: 3,
        maxLoadedAdapters: 2,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math', 'law', 'med', 'fin', 'bio'],
        loadMs: 800,
        decodeMsPerStep: 100,
        coldLoadsPerMinute: 3,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 1000,
        spanMs: 6000,
        staticAdapters: ['sql,chat'],
        queueTimeoutMs: 2000,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 2000,
        maxNumSeqs: 4,
        sloClasses: [
          { name: 'interactive', ttft_ms: 1000, priority: 0 },
          { name: 'batch', ttft_ms: 2500, priority: -1, max_in_flight: 3 },
        ],
      },
      [
        { at: 34, kind: 'request', node: 0, adapter: 6, tokens: 6, prompt: 1817 },
        { at: 278, kind: 'request', node: 2, adapter: 0, tokens: 6, prompt: 1804, cls: 'batch' },
        { at: 409, kind: 'request', node: 1, adapter: 9, tokens: 5, prompt: 1551, cls: 'batch' },
        { at: 482, kind: 'request', node: 2, adapter: 2, tokens: 109, prompt: 601, cls: 'interactive' },
        { at: 499, kind: 'request', node: 0, adapter: 0, tokens: 3, prompt: 1163, cls: 'batch' },
        { at: 1043, kind: 'request', node: 1, adapter: 2, tokens: 4, prompt: 1388, cls: 'interactive' },
        { at: 1150, kind: 'request', node: 1, adapter: 1, tokens: 24, prompt: 1144, cls: 'batch' },
        { at: 1189, kind: 'request', node: 0, adapter: 3, tokens: 5, prompt: 397, cls: 'batch' },
        { at: 1248, kind: 'request', node: 0, adapter: 6, tokens: 3, prompt: 17, cls: 'batch' },
        { at: 1261, kind: 'request', node: 1, adapter: 7, tokens: 35, prompt: 1261 },
        { at: 1263, kind: 'request', node: 2, adapter: 9, tokens: 6, prompt: 821 },
        { at: 1311, kind: 'request', node: 1, adapter: 6, tokens: 38, prompt: 1262, cls: 'batch' },
        { at: 1337, kind: 'request', node: 1, adapter: 6, tokens: 39, prompt: 1213, cls: 'interactive' },
        { at: 1402, kind: 'request', node: 0, adapter: 9, tokens: 6, prompt: 986, cls: 'batch' },
        { at: 1441, kind: 'request', node: 1, adapter: 1, tokens: 58, prompt: 1350, cls: 'interactive' },
        { at: 1543, kind: 'request', node: 1, adapter: -1, tokens: 37, prompt: 1646, cls: 'interactive' },
        { at: 1729, kind: 'request', node: 1, adapter: 1, tokens: 21, prompt: 1151, cls: 'interactive' },
        { at: 1751, kind: 'request', node: 1, adapter: -1, tokens: 33, prompt: 1572, cls: 'batch' },
        { at: 1889, kind: 'request', node: 1, adapter: -1, tokens: 34, prompt: 1500, cls: 'batch' },
        { at: 1981, kind: 'request', node: 1, adapter: 7, tokens: 56, prompt: 1925, cls: 'interactive' },
        { at: 2058, kind: 'request', node: 1, adapter: -1, tokens: 54, prompt: 1279, cls: 'batch' },
        { at: 2362, kind: 'request', node: 2, adapter: 5, tokens: 14, prompt: 456, cls: 'batch' },
        { at: 2371, kind: 'request', node: 1, adapter: 7, tokens: 40, prompt: 1530, cls: 'batch' },
        { at: 2720, kind: 'request', node: 1, adapter: 7, tokens: 57, prompt: 1720 },
        { at: 2955, kind: 'request', node: 1, adapter: 1, tokens: 58, prompt: 1631, cls: 'interactive' },
        { at: 3161, kind: 'request', node: 1, adapter: -1, tokens: 34, prompt: 1115, cls: 'batch' },
        { at: 3620, kind: 'request', node: 1, adapter: 1, tokens: 33, prompt: 1156 },
        { at: 3670, kind: 'request', node: 1, adapter: 7, tokens: 40, prompt: 1174, cls: 'batch' },
        { at: 3699, kind: 'request', node: 1, adapter: 7, tokens: 37, prompt: 1686, cls: 'interactive' },
        { at: 3838, kind: 'request', node: 1, adapter: -1, tokens: 34, prompt: 1363, cls: 'batch' },
        { at: 3935, kind: 'request', node: 1, adapter: -1, tokens: 36, prompt: 1382, cls: 'interactive' },
        { at: 4901, kind: 'request', node: 1, adapter: 6, tokens: 36, prompt: 1856, cls: 'interactive' },
        { at: 4926, kind: 'request', node: 0, adapter: 0, tokens: 3, prompt: 15, cls: 'batch' },
        { at: 5088, kind: 'request', node: 1, adapter: 1, tokens: 38, prompt: 1586, cls: 'interactive' },
      ],
    );
  }, 30_000);
});

describe('a request proxied for an adapter finds it there: an unload lock ended after a poll missed the adapter', () => {
  // Seed 826256 (the shrinker kept all 39 actions): node 2 unloads `med` from replica-1, granted at
  // 808.8 ms; node 2 is cut off at 811 and sends the unload at 812.8 (its end reaches Redis no more),
  // and replica-1 drops `med` at 813. Node 0's poll begun at 1,950 ms reads replica-1 without `med`,
  // kept `unloading` for its holder; the sweep at 1,953 ms ended node 2's lock (silent past
  // node_ttl_ms) and put `med` back `loaded`, so node 0's request of 1,964 ms went to replica-1 and got
  // a 404. An unload ended not done after a read begun since its grant missed the adapter leaves it gone.
  it("seed 826256: a silent node's unload lock ended after a poll missed the adapter leaves it gone", async () => {
    await holds(
      826256,
      {
        nodes: 3,
        replicas: 2,
        maxLoadedAdapters: 1,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math', 'law', 'med', 'fin', 'bio'],
        loadMs: 200,
        decodeMsPerStep: 50,
        coldLoadsPerMinute: 6,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 0,
        spanMs: 5065,
        queueTimeoutMs: 4000,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 500,
        sloClasses: [
          { name: 'interactive', ttft_ms: 1000, priority: 0 },
          { name: 'batch', ttft_ms: 2500, priority: -1 },
        ],
      },
      [
        { at: 5, kind: 'request', node: 2, adapter: 9, tokens: 5, prompt: 147, cls: 'interactive' },
        { at: 7, kind: 'request', node: 2, adapter: 4, tokens: 5, prompt: 265, cls: 'batch' },
        { at: 10, kind: 'request', node: 2, adapter: 5, tokens: 5, prompt: 955, cls: 'batch' },
        { at: 17, kind: 'request', node: 2, adapter: 7, tokens: 5, prompt: 394, cls: 'interactive' },
        { at: 17, kind: 'request', node: 2, adapter: 8, tokens: 1, prompt: 251, cls: 'interactive' },
        { at: 20, kind: 'request', node: 2, adapter: 6, tokens: 6, prompt: 349, cls: 'interactive' },
        { at: 93, kind: 'request', node: 2, adapter: 7, tokens: 3, prompt: 642, cls: 'interactive' },
        { at: 147, kind: 'request', node: 2, adapter: -1, tokens: 6, prompt: 242, cls: 'interactive' },
        { at: 226, kind: 'slow-load', replica: 0, ms: 2035, slowMs: 4951 },
        { at: 550, kind: 'request', node: 0, adapter: 4, tokens: 4, prompt: 339, cls: 'batch' },
        { at: 672, kind: 'request', node: 0, adapter: 0, tokens: 4, prompt: 948, cls: 'batch' },
        { at: 803, kind: 'skew', node: 2, ms: -164 },
        { at: 811, kind: 'partition', node: 2, ms: 5224 },
        { at: 816, kind: 'request', node: 0, adapter: 7, tokens: 5, prompt: 1646 },
        { at: 878, kind: 'request', node: 0, adapter: 7, tokens: 54, prompt: 1208, cls: 'batch' },
        { at: 1048, kind: 'request', node: 1, adapter: 5, tokens: 1, prompt: 1147, cls: 'batch' },
        { at: 1298, kind: 'request', node: 1, adapter: 9, tokens: 6, prompt: 41, cls: 'batch' },
        { at: 1481, kind: 'request', node: 2, adapter: 0, tokens: 2, prompt: 1151, cls: 'batch' },
        { at: 1525, kind: 'request', node: 2, adapter: 2, tokens: 4, prompt: 191, cls: 'interactive' },
        { at: 1529, kind: 'slow-load', replica: 1, ms: 2804, slowMs: 2518 },
        { at: 1964, kind: 'request', node: 0, adapter: 8, tokens: 6, prompt: 1738, cls: 'batch' },
        { at: 2575, kind: 'partition', node: 1, ms: 3460 },
        { at: 2663, kind: 'request', node: 1, adapter: 0, tokens: 3, prompt: 1857, cls: 'batch' },
        { at: 2671, kind: 'request', node: 1, adapter: 1, tokens: 6, prompt: 1453, cls: 'interactive' },
        { at: 2762, kind: 'request', node: 1, adapter: 3, tokens: 2, prompt: 1500, cls: 'interactive' },
        { at: 2848, kind: 'request', node: 1, adapter: 10, tokens: 4, prompt: 899, cls: 'interactive' },
        { at: 3010, kind: 'request', node: 1, adapter: 8, tokens: 6, prompt: 1741, cls: 'batch' },
        { at: 3062, kind: 'request', node: 1, adapter: 7, tokens: 3, prompt: 1708, cls: 'interactive' },
        { at: 3069, kind: 'request', node: 1, adapter: 9, tokens: 2, prompt: 1915, cls: 'batch' },
        { at: 3077, kind: 'request', node: 1, adapter: 2, tokens: 3, prompt: 1918, cls: 'interactive' },
        { at: 4365, kind: 'partition', node: 0, ms: 1670 },
        { at: 4497, kind: 'request', node: 0, adapter: 10, tokens: 1, prompt: 110, cls: 'batch' },
        { at: 4582, kind: 'request', node: 0, adapter: 4, tokens: 5, prompt: 1465, cls: 'batch' },
        { at: 4900, kind: 'request', node: 0, adapter: 5, tokens: 6, prompt: 592, cls: 'interactive' },
        { at: 4904, kind: 'request', node: 0, adapter: 2, tokens: 3, prompt: 1210, cls: 'batch' },
        { at: 4920, kind: 'request', node: 0, adapter: 6, tokens: 3, prompt: 408 },
        { at: 4924, kind: 'request', node: 0, adapter: 1, tokens: 4, prompt: 680, cls: 'batch' },
        { at: 4957, kind: 'request', node: 0, adapter: 0, tokens: 5, prompt: 1624, cls: 'batch' },
        { at: 4963, kind: 'request', node: 0, adapter: 3, tokens: 2, prompt: 1531, cls: 'batch' },
      ],
    );
  }, 30_000);
});

describe("a request proxied for an adapter finds it there: the node's own unload rolled back by a restart", () => {
  // Seed 1038807 (--keep 0,1,2,3,4,6,8,9,19): node 1 (n1g1, restarted at 294 ms) makes room for
  // `law` by unloading `code` from replica-1, granted at 749.9 ms, dropped at 753.9, its end recorded.
  // Redis restarts at 889 ms (down 800 ms) from its snapshot of 500 ms, where `code` is `loaded` on
  // replica-1; no poll of replica-1 reaches Redis before node 1's request for `code` of 1,915 ms,
  // which goes to replica-1 and gets a 404. The node had forgotten its unload once its end was
  // recorded. It now keeps its done unloads, and when the shared state is back after an outage
  // (which may have rolled back to an older copy), reads each `unloading` until a poll begun since.
  it("seed 1038807: a node's own unload, recorded, then lost to a restart from a snapshot", async () => {
    await holds(
      1038807,
      {
        nodes: 3,
        replicas: 2,
        maxLoadedAdapters: 1,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math', 'law'],
        loadMs: 200,
        decodeMsPerStep: 100,
        coldLoadsPerMinute: 1000,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 1000,
        spanMs: 6000,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 500,
        sloClasses: [
          { name: 'interactive', ttft_ms: 1000, priority: 0 },
          { name: 'batch', ttft_ms: 2500, priority: -1, max_in_flight: 2 },
        ],
      },
      [
        { at: 7, kind: 'request', node: 2, adapter: 5, tokens: 4, prompt: 635, cls: 'interactive' },
        { at: 294, kind: 'process-restart', node: 1 },
        { at: 322, kind: 'request', node: 1, adapter: 5, tokens: 1, prompt: 1794, cls: 'batch' },
        { at: 347, kind: 'request', node: 0, adapter: 0, tokens: 3, prompt: 1140 },
        { at: 459, kind: 'request', node: 0, adapter: 2, tokens: 113, prompt: 928, cls: 'batch' },
        { at: 723, kind: 'request', node: 1, adapter: 7, tokens: 4, prompt: 730, cls: 'batch' },
        { at: 889, kind: 'redis-restart', empty: false, downMs: 800 },
        { at: 900, kind: 'request', node: 1, adapter: 4, tokens: 5, prompt: 1890, cls: 'interactive' },
        { at: 1915, kind: 'request', node: 1, adapter: 5, tokens: 6, prompt: 346, cls: 'interactive' },
      ],
    );
  }, 30_000);
});

describe("a request proxied for an adapter finds it there: the node's own unload rolled back by a restart its heartbeat saw", () => {
  // Seed 1534246 (--keep 1,2,3,6,8,9,11): node 1 unloads `code` from replica-0 (its end recorded at
  // 844 ms). Redis restarts at 1,288 ms (down 29 ms) from its oldest snapshot, where `code` is
  // `loaded` on replica-0. No decision of node 1 saw the restart fail: its heartbeat of 1,375 ms was
  // the first call to find another server answering (`run_id`), and the store took its state there
  // again (`reclaim`) without telling own-unloads that the shared state was back, so node 1's request
  // for `code` of 1,387 ms read it `loaded` there and got a 404. Unseeded (before the fix) the first
  // run found the same on node 0 (`med`, unloaded at 710 ms, its request at 1,392 ms). Fix: a state
  // found emptied or on another server (`Outage.stateEmptied`) tells `onSharedAgain` as an outage's end does.
  it("seed 1534246: a node's own unload, recorded, then lost to a restart seen only by its heartbeat", async () => {
    await holds(
      1534246,
      {
        nodes: 3,
        replicas: 2,
        maxLoadedAdapters: 1,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math', 'law', 'med', 'fin', 'bio', 'geo'],
        loadMs: 200,
        decodeMsPerStep: 100,
        coldLoadsPerMinute: 6,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 0,
        spanMs: 2000,
        queueTimeoutMs: 4000,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 500,
      },
      [
        { at: 144, kind: 'request', node: 2, adapter: -1, tokens: 31, prompt: 517 },
        { at: 153, kind: 'request', node: 2, adapter: 5, tokens: 1, prompt: 1550 },
        { at: 256, kind: 'request', node: 0, adapter: 7, tokens: 1, prompt: 190 },
        { at: 830, kind: 'request', node: 1, adapter: 9, tokens: 4, prompt: 1806 },
        { at: 1004, kind: 'request', node: 0, adapter: 8, tokens: 2, prompt: 452 },
        { at: 1213, kind: 'request', node: 1, adapter: 5, tokens: 5, prompt: 1807 },
        { at: 1288, kind: 'redis-restart', empty: false, downMs: 29 },
      ],
    );
  }, 30_000);
});

describe("a request proxied for an adapter finds it there: a load's end, replayed, over a node's own later unload", () => {
  // Seed 1534246 (--keep 1,2,3,6,8,9,11,12; the seed's second failure, after the fix above). Redis
  // restarts at 1,288 ms from its oldest snapshot, which still holds node 2's load lock of `code` on
  // replica-1 (begun at 163 ms, ended at 369 ms). Node 1 had unloaded `code` from there at 843 ms,
  // lost by the rollback too; its request for `code` of 1,213 ms waits on that `loading` entry, and
  // its poll begun at 2,035 ms, after the return, ends its own `unloading` reading (a poll leaves a
  // locked entry alone). Node 2, back at 2,337 ms, sends its load's end again (EndedLocks.replay,
  // seed 1002201), which marked `code` `loaded`: node 1 proxied onto its own unload, a 404. Fix: a
  // replayed load end is old news, it ends the lock and forgets the adapter there (as the lock of a
  // stopped holder): the next poll, or a request's own load, reads what the replica holds now.
  it("seed 1534246: a replayed load end marks nothing loaded over another node's unload", async () => {
    await holds(
      1534246,
      {
        nodes: 3,
        replicas: 2,
        maxLoadedAdapters: 1,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math', 'law', 'med', 'fin', 'bio', 'geo'],
        loadMs: 200,
        decodeMsPerStep: 100,
        coldLoadsPerMinute: 6,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 0,
        spanMs: 2000,
        queueTimeoutMs: 4000,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 500,
      },
      [
        { at: 144, kind: 'request', node: 2, adapter: -1, tokens: 31, prompt: 517 },
        { at: 153, kind: 'request', node: 2, adapter: 5, tokens: 1, prompt: 1550 },
        { at: 256, kind: 'request', node: 0, adapter: 7, tokens: 1, prompt: 190 },
        { at: 830, kind: 'request', node: 1, adapter: 9, tokens: 4, prompt: 1806 },
        { at: 1004, kind: 'request', node: 0, adapter: 8, tokens: 2, prompt: 452 },
        { at: 1213, kind: 'request', node: 1, adapter: 5, tokens: 5, prompt: 1807 },
        { at: 1288, kind: 'redis-restart', empty: false, downMs: 29 },
        { at: 1325, kind: 'request', node: 2, adapter: 0, tokens: 4, prompt: 1965 },
      ],
    );
  }, 30_000);
});

describe('a request is sent or refused within its access bound: a lease aged out under a live wait for room', () => {
  // Seed 1251595 (all 98 actions: shrinking keeps 97; the emptied passes' shape, 74 FLUSHALLs at
  // 335-513 ms, none later; node_ttl_ms 500, two replicas of one slot, loads of 1.5 s,
  // lease_max_age_ms 4 s). `team,a` on node 2 came at 1084 ms and took its lease on replica-0, then
  // waited for room there behind `sql`, `geo` and `med` for 6.8 s, past lease_max_age_ms: the expiry
  // sweep reclaimed its lease, so its load landed (7,846 ms) with no lease on `team,a`, and 3 ms later
  // another waiter read it loaded with nothing in flight and unloaded it for room; twice more, and
  // it was answered 17,300 ms after it came (bound 16,500 ms). A lease bounds a dead holder's count;
  // now a request waiting under its lease takes a fresh one every half lease_max_age_ms
  // (src/router/waiting-lease.ts), so its load lands under a lease.
  it('seed 1251595: a load made for a request still waiting lands under its lease', async () => {
    const flushes = [
      335, 339, 342, 343, 347, 349, 352, 355, 359, 360, 362, 363, 365, 369, 370, 373, 374, 376, 379, 381, 382,
      386, 387, 390, 392, 394, 395, 398, 399, 402, 405, 406, 408, 410, 412, 416, 420, 423, 424, 427, 428, 432,
      434, 436, 438, 440, 444, 447, 450, 454, 455, 457, 458, 461, 465, 469, 473, 477, 479, 480, 483, 487, 489,
      490, 492, 495, 497, 499, 500, 502, 506, 508, 511, 513,
    ].map((at): Schedule['actions'][number] => ({ at, kind: 'flushall' }));
    const requests: Schedule['actions'] = [
      { at: 262, kind: 'request', node: 2, adapter: 3, tokens: 2, prompt: 1414 },
      { at: 273, kind: 'request', node: 1, adapter: 9, tokens: 3, prompt: 1134 },
      { at: 352, kind: 'request', node: 1, adapter: 7, tokens: 6, prompt: 1039 },
      { at: 373, kind: 'request', node: 2, adapter: 2, tokens: 3, prompt: 66 },
      { at: 430, kind: 'request', node: 0, adapter: 8, tokens: 1, prompt: 1519 },
      { at: 475, kind: 'request', node: 0, adapter: 5, tokens: 1, prompt: 374 },
      { at: 615, kind: 'request', node: 1, adapter: 6, tokens: 5, prompt: 442 },
      { at: 615, kind: 'request', node: 1, adapter: 4, tokens: 2, prompt: 1538 },
      { at: 616, kind: 'request', node: 1, adapter: 4, tokens: 6, prompt: 520 },
      { at: 616, kind: 'request', node: 1, adapter: 2, tokens: 1, prompt: 436 },
      { at: 726, kind: 'request', node: 0, adapter: 7, tokens: 6, prompt: 911 },
      { at: 730, kind: 'request', node: 0, adapter: 2, tokens: 1, prompt: 373 },
      { at: 1020, kind: 'request', node: 2, adapter: 4, tokens: 6, prompt: 1037 },
      { at: 1077, kind: 'request', node: 1, adapter: 11, tokens: 4, prompt: 553 },
      { at: 1084, kind: 'request', node: 2, adapter: 2, tokens: 1, prompt: 1066 },
      { at: 1087, kind: 'request', node: 2, adapter: 0, tokens: 2, prompt: 318 },
      { at: 1143, kind: 'request', node: 2, adapter: 6, tokens: 1, prompt: 283 },
      { at: 1842, kind: 'request', node: 0, adapter: 9, tokens: 4, prompt: 769 },
      { at: 1901, kind: 'request', node: 1, adapter: 8, tokens: 2, prompt: 1136 },
      { at: 1932, kind: 'request', node: 1, adapter: 0, tokens: 4, prompt: 1306 },
      { at: 2635, kind: 'request', node: 2, adapter: 5, tokens: 3, prompt: 1420 },
      { at: 3516, kind: 'request', node: 0, adapter: 7, tokens: 4, prompt: 1747 },
      { at: 3940, kind: 'request', node: 0, adapter: 7, tokens: 2, prompt: 1095 },
      { at: 3972, kind: 'request', node: 0, adapter: 11, tokens: 6, prompt: 1169 },
    ];
    // As drawn: by time, a FLUSHALL before a request at the same ms (a stable sort).
    const actions = [...flushes, ...requests].sort((a, b) => a.at - b.at);
    const r = await runSchedule({
      seed: 1251595,
      world: {
        ...WORLD,
        replicas: 2,
        spanMs: 4118,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 500,
      },
      actions,
    });
    expect(r.violation?.detail).toBeUndefined();
  }, 60_000);
});

describe('a prefetch unloads an idle adapter only for a load it makes', () => {
  // Seed 60 (--keep 1,2; prefetch drawn, branch dst-prefetch): cold_loads_per_minute 3, so
  // prefetching may start no load at all (a quarter of 3 a minute, rounded down). Requests for
  // team and team,a on one-slot replicas; node 0's tick plans team,a on replica-1 in place of the
  // idle, colder team (evict factor 1). The manager unloaded team to make room (Room.claimSlot
  // makes room before it asks the budget: a request keeps the room it made), then the budget
  // refused the load: team gone, the slot left empty. The fix: a prefetch with a victim takes its
  // budget unit before the manager makes room (src/prefetch/prefetcher.ts), so a refused load
  // unloads nothing.
  it('seed 60: a prefetch with no budget left unloads no victim', async () => {
    const r = await runSchedule({
      seed: 60,
      world: {
        ...WORLD,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math'],
        loadMs: 800,
        coldLoadsPerMinute: 3,
        spanMs: 2000,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 2000,
        prefetch: { intervalMs: 500, halfLifeMs: 1000, loadsPerMinute: 1, hysteresis: 1, evictFactor: 1 },
      },
      actions: [
        { at: 645, kind: 'request', node: 2, adapter: 3, tokens: 1, prompt: 340 },
        { at: 1112, kind: 'request', node: 0, adapter: 2, tokens: 6, prompt: 1364 },
      ],
    });
    expect(r.prefetch?.unloads).toBe(0);
    expect(r.violation?.detail).toBeUndefined();
  });
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

describe('a replica seen down gets no request: deciding alone, from the next poll after one that timed out', () => {
  // Seed 1646547 (--keep 0,1,2,3,10,13; the check's): node 0's path to replica-1 is slow from 113 ms
  // (2,372 ms each way), node 0 is cut off from Redis from 779 ms (deciding alone: its health is its
  // own polls), and replica-1 answers 500 from 1,086 ms. Node 0's poll of replica-1 begun at 1,427 ms
  // crossed the slow path and timed out at 2,427; its round at 1,951 skipped replica-1 (that poll
  // still under way), and the next came at about 2,950. Its request proxied at 2,845 ms went to
  // replica-1, which no poll of node 0 had read down: the check counted from the outage's start (1,759
  // ms). Deciding alone, a node now sees the down from its next poll after one that timed out.
  it('seed 1646547: a node deciding alone whose poll of the replica timed out on a slow path', async () => {
    await holds(
      1646547,
      {
        nodes: 3,
        replicas: 2,
        maxLoadedAdapters: 2,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a'],
        loadMs: 800,
        decodeMsPerStep: 100,
        coldLoadsPerMinute: 3,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 1000,
        spanMs: 4936,
        staticAdapters: ['sql,chat'],
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 500,
        sloClasses: [
          { name: 'interactive', ttft_ms: 1000, priority: 0 },
          { name: 'batch', ttft_ms: 2500, priority: -1 },
        ],
      },
      [
        { at: 13, kind: 'request', node: 0, adapter: 0, tokens: 6, prompt: 331, cls: 'interactive' },
        { at: 14, kind: 'request', node: 0, adapter: 1, tokens: 1, prompt: 778, cls: 'interactive' },
        { at: 17, kind: 'request', node: 0, adapter: 2, tokens: 2, prompt: 635, cls: 'batch' },
        { at: 113, kind: 'slow-path', node: 0, replica: 1, ms: 1373, hopMs: 2372 },
        { at: 779, kind: 'partition', node: 0, ms: 4845 },
        { at: 1086, kind: 'replica-outage', replica: 1, ms: 2676, mode: 'error500' },
      ],
    );
  }, 30_000);

  // Seed 2676738 (--keep 0,2,3,4,5,9,10,13,23; the check's): replica-1's scrape times out 600-934 ms,
  // so node 0's poll of it begun at 627 ms timed out at 1,627 (its round at 1,091 skipped it, that
  // poll under way); replica-1 answers 500 from 952 ms; every node is cut off from Redis from 1,771.
  // Node 0's next poll (2,075.8 ms) read the 500 at 2,076.8, and its write waited for the shared
  // clock read beside it, sent into the partition, to time out (about 2,576). Node 0's request for
  // `team,a` (553 ms), deciding alone after its wait, read replica-1 unknown in its local store and
  // went there at 2,573 ms, 496 ms after that verdict. The check took the verdict as sight from the
  // 500's start (1,621 ms before); the timeout before it held that poll back as with no verdict yet.
  it('seed 2676738: a verdict after the poll that timed out counts from that timeout', async () => {
    await holds(
      2676738,
      {
        nodes: 3,
        replicas: 2,
        maxLoadedAdapters: 2,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math', 'law', 'med', 'fin'],
        loadMs: 1500,
        decodeMsPerStep: 50,
        coldLoadsPerMinute: 1000,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 1000,
        spanMs: 5772,
        staticAdapters: ['sql,chat'],
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 500,
        queueTimeoutMs: 2000,
        maxNumSeqs: 4,
        prefetch: { intervalMs: 2000, halfLifeMs: 1000, loadsPerMinute: 1, hysteresis: 1, evictFactor: 2 },
      },
      [
        { at: 83, kind: 'request', node: 1, adapter: 0, tokens: 2, prompt: 573 },
        { at: 358, kind: 'replica-restart', replica: 0, downMs: 45 },
        { at: 521, kind: 'request', node: 0, adapter: 1, tokens: 3, prompt: 1719 },
        { at: 553, kind: 'request', node: 0, adapter: 2, tokens: 6, prompt: 1805 },
        { at: 600, kind: 'scrape', replica: 1, ms: 334, mode: 'timeout' },
        { at: 610, kind: 'request', node: 0, adapter: 6, tokens: 6, prompt: 1707 },
        { at: 611, kind: 'flushall' },
        { at: 952, kind: 'replica-outage', replica: 1, ms: 1903, mode: 'error500' },
        { at: 1771, kind: 'partition', node: -1, ms: 811 },
      ],
    );
  }, 30_000);
});

describe('a replica seen down gets no request: deciding alone, not before the poll under way began', () => {
  // Seed 1729199 (--keep 5,7,12,14,17,18,20; the check's): replica-0 refuses from 179 ms (restarts
  // at 179 and 723, up again at 2,529); node 2 is cut off from Redis from 835 ms and its path to
  // replica-0 is slow from 1,036 (2,042 ms each way). Node 2's last poll of replica-0 that ended
  // began at 20 ms (up); its next round waited out Redis's timeout and began its poll at 1,514 ms,
  // deciding alone from then; that poll was still crossing the slow path when node 2 routed a
  // request there at 1,844. No poll of node 2 could have read the refusal yet: the check counted
  // from the refusal's start. Deciding alone, a node now sees a down no earlier than its poll under
  // way began, unless a poll of its begun after the down has ended with a verdict.
  it('seed 1729199: a node deciding alone whose poll of the replica is still on a slow path', async () => {
    await holds(
      1729199,
      {
        nodes: 3,
        replicas: 2,
        maxLoadedAdapters: 1,
        adapters: ['sql', 'chat', 'team,a', 'team'],
        loadMs: 200,
        decodeMsPerStep: 100,
        coldLoadsPerMinute: 6,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 0,
        spanMs: 5066,
        staticAdapters: ['sql,chat'],
        queueTimeoutMs: 4000,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 500,
        prefetch: { intervalMs: 1000, halfLifeMs: 3000, loadsPerMinute: 1, hysteresis: 0.5, evictFactor: 2 },
      },
      [
        { at: 15, kind: 'request', node: 2, adapter: 2, tokens: 3, prompt: 676 },
        { at: 179, kind: 'replica-restart', replica: 0, downMs: 737 },
        { at: 723, kind: 'replica-restart', replica: 0, downMs: 1806 },
        { at: 835, kind: 'partition', node: 2, ms: 4536 },
        { at: 1036, kind: 'slow-path', node: 2, replica: 0, ms: 610, hopMs: 2042 },
        { at: 1441, kind: 'request', node: 0, adapter: -1, tokens: 6, prompt: 602 },
        { at: 1844, kind: 'request', node: 2, adapter: 4, tokens: 3, prompt: 874 },
      ],
    );
  }, 30_000);
});

describe('a hold never waits with nothing that could change: a call sent into a partition times out after its heal', () => {
  // Seed 1638475 (--keep 0,1,2; the check's): every node cut off from Redis 1,103-1,311 ms. Node 1's
  // request for `team` (1,352 ms) needs room on replica-0 (`chat` idle, limit 1): unloads are held
  // off there until 2,002 (the state's first registration), and node 1 decides alone from 1,737 ms:
  // a call it sent 74 ms before the heal timed out (the record's 500 ms). Deciding alone it unloads
  // nothing; its probe took the state back at 2,758 and held unloads off for two probes, to 4,758;
  // `chat` was unloaded at 4,771 and the request routed at 5,003 (3,651 ms). The check took the fleet
  // as quiet from the heal; it is quiet from the last call sent into the partition timing out.
  it('seed 1638475: a node that began deciding alone after the heal', async () => {
    await holds(
      1638475,
      {
        nodes: 3,
        replicas: 2,
        maxLoadedAdapters: 1,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math', 'law', 'med', 'fin'],
        loadMs: 200,
        decodeMsPerStep: 100,
        coldLoadsPerMinute: 6,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 0,
        spanMs: 2000,
        queueTimeoutMs: 4000,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 2000,
        prefetch: { intervalMs: 1000, halfLifeMs: 3000, loadsPerMinute: 30, hysteresis: 1, evictFactor: 8 },
      },
      [
        { at: 34, kind: 'request', node: 1, adapter: 1, tokens: 1, prompt: 428 },
        { at: 1103, kind: 'partition', node: -1, ms: 208 },
        { at: 1352, kind: 'request', node: 1, adapter: 3, tokens: 5, prompt: 995 },
      ],
    );
  }, 30_000);
});

describe('no unload of a busy adapter: a resident a poll adopted and read busy, no lease here', () => {
  // Seed 1965638 (--keep 0,1,2,3,7,10,11,12,15,16,17,21,22,23; the router's): an empty Redis restart
  // at 107 ms (down 298 ms) loses node 2's lease of `sql` on replica-1, whose load lands at 902; node 2
  // decides alone from 245 ms (a call refused while Redis was down) and is cut off from Redis from 749
  // (1,207 ms), so its probes never take the state back before 2,745. Its request of `sql` runs on
  // replica-1 905-1,260 with no lease in Redis. Node 0's poll begun at 955 reads `sql` running; the
  // emptied state did not know `sql`, so the poll's own registry read adopted it (lastUsed = the
  // snapshot's time), and the hold took that lastUsed past the poll's start for a lease released while
  // the reading travelled back: no hold. Node 2's next request of `sql` (1,175 ms, alone) crosses a
  // slow path to replica-1 (1,722 ms each way); node 0 unloaded `sql` at 2,521 to make room for
  // `team` on an idle word, 1,561 ms after its poll read `sql` busy, inside the 2 s hold.
  it('seed 1965638: a poll that adopts a busy adapter starts the unseen hold', async () => {
    await holds(
      1965638,
      {
        nodes: 3,
        replicas: 2,
        maxLoadedAdapters: 2,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math', 'law'],
        loadMs: 800,
        decodeMsPerStep: 100,
        coldLoadsPerMinute: 1000,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 1000,
        spanMs: 2000,
        staticAdapters: ['sql,chat'],
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 500,
        sloClasses: [
          { name: 'interactive', ttft_ms: 1000, priority: 0 },
          { name: 'batch', ttft_ms: 2500, priority: -1, max_in_flight: 1 },
        ],
      },
      [
        { at: 77, kind: 'request', node: 2, adapter: 0, tokens: 1, prompt: 1495, cls: 'batch' },
        { at: 107, kind: 'redis-restart', empty: true, downMs: 298 },
        { at: 157, kind: 'request', node: 1, adapter: -1, tokens: 6, prompt: 1583, cls: 'batch' },
        { at: 243, kind: 'request', node: 2, adapter: 6, tokens: 6, prompt: 1425, cls: 'interactive' },
        { at: 749, kind: 'partition', node: 2, ms: 1207 },
        { at: 1113, kind: 'slow-path', node: 2, replica: 1, ms: 681, hopMs: 1722 },
        { at: 1162, kind: 'request', node: 0, adapter: 5, tokens: 4, prompt: 1833, cls: 'batch' },
        { at: 1175, kind: 'request', node: 2, adapter: 0, tokens: 2, prompt: 367, cls: 'interactive' },
        { at: 1382, kind: 'request', node: 2, adapter: 1, tokens: 30, prompt: 380, cls: 'batch' },
        { at: 1423, kind: 'request', node: 2, adapter: 1, tokens: 21, prompt: 455, cls: 'batch' },
        { at: 1442, kind: 'request', node: 1, adapter: 1, tokens: 30, prompt: 215, cls: 'batch' },
        { at: 1691, kind: 'request', node: 0, adapter: 3, tokens: 3, prompt: 1694 },
        { at: 1741, kind: 'skew', node: 1, ms: 223 },
        { at: 1754, kind: 'request', node: 1, adapter: 4, tokens: 5, prompt: 164, cls: 'interactive' },
      ],
    );
  }, 30_000);
});

describe('the cold-load budget goes to loads: units re-published after an emptied store', () => {
  // Seed 2219256 (all 22 actions: removing any one lets it pass; prefetch drawn; failing on main
  // 15b79b1), the model's: cold_loads_per_minute 3, the three spent by 660 ms (law for
  // node 2, chat and sql for node 1), a FLUSHALL at 1,666 ms. Node 2 re-publishes its spend (an add
  // of 1 opens the new window at 1,768), then spends one for team (1,792); node 1 re-publishes its
  // two and, on the same link in the same step, asks for the held batch request 3's law: refused
  // (4 counted, the limit 3), rightly. The modelled Redis ran the add of 2 as two awaited spends, so
  // the refusal ran between them, and its ledger listed the add after the refusal (by its answer):
  // the check counted 1 grant and 1 added before it. Now the add is one step as budgetAdd's INCRBY,
  // and the ledger is in the order the scripts ran.
  it('seed 2219256: a refusal after a node re-published two spends in one call is judged with both', async () => {
    await holds(
      2219256,
      {
        nodes: 3,
        replicas: 2,
        maxLoadedAdapters: 4,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math', 'law'],
        loadMs: 1500,
        decodeMsPerStep: 50,
        coldLoadsPerMinute: 3,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 0,
        spanMs: 2000,
        staticAdapters: ['sql,chat'],
        queueTimeoutMs: 4000,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 2000,
        sloClasses: [
          { name: 'interactive', ttft_ms: 1000, priority: 0 },
          { name: 'batch', ttft_ms: 2500, priority: -1, max_in_flight: 1 },
        ],
        prefetch: { intervalMs: 2000, halfLifeMs: 10000, loadsPerMinute: 4, hysteresis: 0, evictFactor: 1 },
      },
      [
        { at: 56, kind: 'request', node: 1, adapter: -1, tokens: 6, prompt: 935, cls: 'interactive' },
        { at: 242, kind: 'request', node: 2, adapter: 7, tokens: 2, prompt: 1624 },
        { at: 262, kind: 'request', node: 1, adapter: 7, tokens: 2, prompt: 1917, cls: 'batch' },
        { at: 398, kind: 'request', node: 1, adapter: 1, tokens: 5, prompt: 1948, cls: 'batch' },
        { at: 584, kind: 'request', node: 1, adapter: 0, tokens: 6, prompt: 159, cls: 'interactive' },
        { at: 868, kind: 'request', node: 0, adapter: 8, tokens: 4, prompt: 1265, cls: 'batch' },
        { at: 996, kind: 'request', node: 1, adapter: 4, tokens: 1, prompt: 643, cls: 'batch' },
        { at: 1298, kind: 'request', node: 0, adapter: 1, tokens: 1, prompt: 789, cls: 'batch' },
        { at: 1360, kind: 'request', node: 0, adapter: 7, tokens: 6, prompt: 1253, cls: 'batch' },
        { at: 1367, kind: 'process-restart', node: 0 },
        { at: 1392, kind: 'request', node: 1, adapter: 3, tokens: 22, prompt: 12, cls: 'batch' },
        { at: 1464, kind: 'request', node: 1, adapter: 3, tokens: 21, prompt: 31, cls: 'batch' },
        { at: 1525, kind: 'request', node: 1, adapter: 3, tokens: 10, prompt: 458, cls: 'batch' },
        { at: 1553, kind: 'request', node: 0, adapter: 3, tokens: 6, prompt: 1396, cls: 'interactive' },
        { at: 1582, kind: 'request', node: 2, adapter: 3, tokens: 14, prompt: 18, cls: 'batch' },
        { at: 1583, kind: 'request', node: 0, adapter: 6, tokens: 5, prompt: 937, cls: 'interactive' },
        { at: 1594, kind: 'request', node: 1, adapter: 3, tokens: 1, prompt: 242, cls: 'batch' },
        { at: 1601, kind: 'request', node: 0, adapter: 4, tokens: 6, prompt: 1595, cls: 'batch' },
        { at: 1610, kind: 'request', node: 0, adapter: 3, tokens: 12, prompt: 497, cls: 'batch' },
        { at: 1636, kind: 'request', node: 1, adapter: 3, tokens: 11, prompt: 259, cls: 'batch' },
        { at: 1666, kind: 'flushall' },
        { at: 1851, kind: 'request', node: 2, adapter: 4, tokens: 2, prompt: 635, cls: 'interactive' },
      ],
    );
  }, 30_000);
});

describe('a request makes room for its load and no more: a slot granted, its answer on its way', () => {
  // Seed 2223196 (the whole schedule: dropping even the actions after 2,018 ms changes the draws and it
  // holds). Request 27 (team,a, node 0) waits for room on replica-1 (math, law: full) and is granted
  // math's unload at 2,002 ms (unloaded at 2,007). Node 1's request for chat, waiting for room there
  // too, reads the freed slot at 2,016 and the store grants its load at 2,017, just before request
  // 27's beginLoad (refused); request 27 reads law and chat loading (full) and is granted law's unload
  // at 2,017: docs/reliability.md "Whatever fills the replica takes the room (another load ...)" and
  // FleetStore.beginUnload "a replica filled by another load ... lets the next unload for it go". Chat's
  // slot fills the replica, but its grant's answer had not reached node 1 when law's unload answered
  // (2,018), and the check recorded a slot only at its answer: "left 0 loaded, 0 loading and 1
  // adapter(s) being made room for". Not a bug in src/: the check now records a slot when the store
  // grants it (RedisLink.grantRan).
  it('seed 2223196: a slot granted whose answer is still on its way fills the room', async () => {
    await holds(
      2223196,
      {
        nodes: 3,
        replicas: 3,
        maxLoadedAdapters: 2,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math', 'law'],
        loadMs: 200,
        decodeMsPerStep: 100,
        coldLoadsPerMinute: 1000,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 1000,
        spanMs: 3942,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 500,
        queueTimeoutMs: 2000,
        maxNumSeqs: 4,
        prefetch: { intervalMs: 2000, halfLifeMs: 3000, loadsPerMinute: 4, hysteresis: 1, evictFactor: 2 },
      },
      [
        { at: 122, kind: 'request', node: 1, adapter: 1, tokens: 24, prompt: 1485 },
        { at: 191, kind: 'request', node: 1, adapter: 3, tokens: 5, prompt: 1108 },
        { at: 206, kind: 'request', node: 1, adapter: 6, tokens: 6, prompt: 1597 },
        { at: 210, kind: 'request', node: 1, adapter: 6, tokens: 1, prompt: 337 },
        { at: 250, kind: 'request', node: 1, adapter: 0, tokens: 50, prompt: 1738 },
        { at: 298, kind: 'request', node: 1, adapter: -1, tokens: 22, prompt: 1947 },
        { at: 448, kind: 'scrape', replica: 2, ms: 229, mode: 'truncated' },
        { at: 465, kind: 'request', node: 1, adapter: 0, tokens: 55, prompt: 1131 },
        { at: 470, kind: 'slow-path', node: 0, replica: 2, ms: 486, hopMs: 1984 },
        { at: 517, kind: 'request', node: 1, adapter: -1, tokens: 25, prompt: 1892 },
        { at: 560, kind: 'request', node: 1, adapter: 1, tokens: 25, prompt: 1207 },
        { at: 567, kind: 'request', node: 1, adapter: 0, tokens: 2, prompt: 1262 },
        { at: 575, kind: 'request', node: 1, adapter: 0, tokens: 46, prompt: 1079 },
        { at: 709, kind: 'request', node: 1, adapter: -1, tokens: 54, prompt: 1472 },
        { at: 714, kind: 'request', node: 1, adapter: 0, tokens: 27, prompt: 1494 },
        { at: 718, kind: 'request', node: 2, adapter: 3, tokens: 3, prompt: 730 },
        { at: 778, kind: 'request', node: 0, adapter: 3, tokens: 4, prompt: 1255 },
        { at: 940, kind: 'request', node: 1, adapter: 1, tokens: 1, prompt: 867 },
        { at: 963, kind: 'request', node: 1, adapter: -1, tokens: 51, prompt: 1274 },
        { at: 964, kind: 'request', node: 1, adapter: 0, tokens: 30, prompt: 1900 },
        { at: 1019, kind: 'request', node: 1, adapter: 3, tokens: 3, prompt: 1667 },
        { at: 1024, kind: 'request', node: 1, adapter: 0, tokens: 44, prompt: 1559 },
        { at: 1024, kind: 'request', node: 1, adapter: -1, tokens: 47, prompt: 1300 },
        { at: 1027, kind: 'request', node: 0, adapter: 7, tokens: 6, prompt: 1120 },
        { at: 1143, kind: 'request', node: 0, adapter: 5, tokens: 5, prompt: 1141 },
        { at: 1183, kind: 'request', node: 1, adapter: 1, tokens: 20, prompt: 1753 },
        { at: 1210, kind: 'request', node: 1, adapter: 1, tokens: 57, prompt: 1727 },
        { at: 1221, kind: 'request', node: 2, adapter: 7, tokens: 1, prompt: 1927 },
        { at: 1243, kind: 'request', node: 0, adapter: 2, tokens: 2, prompt: 870 },
        { at: 1258, kind: 'request', node: 1, adapter: -1, tokens: 48, prompt: 1979 },
        { at: 1310, kind: 'request', node: 1, adapter: 3, tokens: 6, prompt: 653 },
        { at: 1524, kind: 'request', node: 1, adapter: 3, tokens: 2, prompt: 752 },
        { at: 1549, kind: 'request', node: 1, adapter: 1, tokens: 33, prompt: 1737 },
        { at: 1565, kind: 'request', node: 1, adapter: 0, tokens: 41, prompt: 1659 },
        { at: 1585, kind: 'request', node: 1, adapter: 1, tokens: 29, prompt: 1912 },
        { at: 1604, kind: 'request', node: 1, adapter: 1, tokens: 58, prompt: 1709 },
        { at: 1747, kind: 'request', node: 0, adapter: 1, tokens: 6, prompt: 1227 },
        { at: 1957, kind: 'request', node: 1, adapter: 0, tokens: 29, prompt: 1554 },
        { at: 1980, kind: 'request', node: 1, adapter: -1, tokens: 48, prompt: 1747 },
        { at: 1985, kind: 'request', node: 1, adapter: 1, tokens: 27, prompt: 1317 },
        { at: 2011, kind: 'request', node: 1, adapter: 0, tokens: 43, prompt: 1491 },
        { at: 2180, kind: 'request', node: 1, adapter: 0, tokens: 23, prompt: 1934 },
        { at: 2366, kind: 'request', node: 1, adapter: 0, tokens: 31, prompt: 1517 },
        { at: 2447, kind: 'request', node: 1, adapter: -1, tokens: 37, prompt: 1111 },
        { at: 2504, kind: 'request', node: 1, adapter: 0, tokens: 36, prompt: 1445 },
        { at: 2553, kind: 'request', node: 1, adapter: -1, tokens: 33, prompt: 1442 },
        { at: 2657, kind: 'request', node: 1, adapter: 0, tokens: 54, prompt: 1463 },
        { at: 2680, kind: 'request', node: 1, adapter: 0, tokens: 46, prompt: 1664 },
        { at: 2733, kind: 'request', node: 1, adapter: 0, tokens: 34, prompt: 1698 },
        { at: 2900, kind: 'request', node: 1, adapter: 0, tokens: 49, prompt: 1816 },
        { at: 2973, kind: 'request', node: 1, adapter: -1, tokens: 35, prompt: 1076 },
        { at: 3011, kind: 'request', node: 1, adapter: 1, tokens: 34, prompt: 1152 },
        { at: 3049, kind: 'request', node: 1, adapter: -1, tokens: 32, prompt: 1884 },
        { at: 3122, kind: 'request', node: 1, adapter: 1, tokens: 29, prompt: 1530 },
        { at: 3472, kind: 'request', node: 1, adapter: 0, tokens: 49, prompt: 1173 },
        { at: 3479, kind: 'request', node: 1, adapter: 0, tokens: 60, prompt: 1287 },
        { at: 3719, kind: 'request', node: 1, adapter: 0, tokens: 56, prompt: 1596 },
        { at: 3754, kind: 'request', node: 1, adapter: -1, tokens: 37, prompt: 1575 },
        { at: 3759, kind: 'request', node: 1, adapter: 1, tokens: 22, prompt: 1883 },
      ],
    );
  }, 30_000);
});

describe('the cold-load budget goes to loads: a refund a Sentinel switch lost', () => {
  // Seed 2228354 (--keep 0,1,2,3,4,5,8,9,10,23,24,25,26,27,28,29,30,31,32; prefetch drawn; failing
  // on main dc9e1f2 and on e16ae2b), the model's: cold_loads_per_minute 6, the fleet window opened
  // at 48 ms. Spent by 964 ms: requests 1, 2, 3, 5, 4 and node 2's prefetch (953.6 ms). The prefetch
  // gave its unit back at 973.6 ms (its load never called): Redis acknowledged the refund, then the
  // Sentinel switch at 1,001 ms promoted a replica that missed the last 5 writes, that refund among
  // them. The window in Redis holds 6 spends again, and a later request is refused, rightly: the
  // refund was lost with the write, the unit stays spent (docs/reliability.md: acknowledged writes a
  // switch loses). The check subtracted the lost refund (5 counted); it now skips refunds the
  // state lost.
  it('seed 2228354: a refund lost in a switch does not count as given back', async () => {
    await holds(
      2228354,
      {
        nodes: 3,
        replicas: 2,
        maxLoadedAdapters: 1,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math', 'law', 'med', 'fin', 'bio'],
        loadMs: 200,
        decodeMsPerStep: 100,
        coldLoadsPerMinute: 6,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 1000,
        spanMs: 5183,
        queueTimeoutMs: 2000,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 500,
        maxNumSeqs: 4,
        sloClasses: [
          { name: 'interactive', ttft_ms: 1000, priority: 0 },
          { name: 'batch', ttft_ms: 2500, priority: -1, max_in_flight: 3 },
        ],
        prefetch: { intervalMs: 500, halfLifeMs: 1000, loadsPerMinute: 30, hysteresis: 0.5, evictFactor: 8 },
      },
      [
        { at: 31, kind: 'request', node: 1, adapter: 7, tokens: 1, prompt: 950 },
        { at: 68, kind: 'request', node: 1, adapter: 6, tokens: 3, prompt: 560, cls: 'interactive' },
        { at: 140, kind: 'skew', node: 0, ms: -262 },
        { at: 148, kind: 'request', node: 1, adapter: 10, tokens: 1, prompt: 526, cls: 'interactive' },
        { at: 653, kind: 'request', node: 2, adapter: 1, tokens: 3, prompt: 1433, cls: 'interactive' },
        { at: 900, kind: 'request', node: 0, adapter: 9, tokens: 5, prompt: 1737, cls: 'interactive' },
        { at: 979, kind: 'process-restart', node: 0 },
        { at: 1001, kind: 'switch', lost: 5 },
        { at: 1044, kind: 'request', node: 0, adapter: 0, tokens: 4, prompt: 843, cls: 'interactive' },
        { at: 1872, kind: 'slow', node: 0, ms: 2608, slowMs: 1468 },
        { at: 1881, kind: 'request', node: 1, adapter: 10, tokens: 39, prompt: 1869, cls: 'batch' },
        { at: 1903, kind: 'request', node: 2, adapter: 4, tokens: 4, prompt: 1695, cls: 'interactive' },
        { at: 1955, kind: 'request', node: 1, adapter: 1, tokens: 6, prompt: 1335, cls: 'interactive' },
        { at: 2015, kind: 'request', node: 1, adapter: 1, tokens: 53, prompt: 1420, cls: 'interactive' },
        { at: 2116, kind: 'request', node: 1, adapter: 10, tokens: 56, prompt: 1993, cls: 'batch' },
        { at: 2417, kind: 'request', node: 1, adapter: 10, tokens: 51, prompt: 1055, cls: 'batch' },
        { at: 2579, kind: 'request', node: 1, adapter: -1, tokens: 48, prompt: 1363, cls: 'batch' },
        { at: 2709, kind: 'request', node: 1, adapter: 1, tokens: 49, prompt: 1319, cls: 'interactive' },
        { at: 2953, kind: 'request', node: 1, adapter: 10, tokens: 34, prompt: 1781, cls: 'interactive' },
      ],
    );
  });
});

describe('a replica Kong could not reach: every replica read down, one by a marking a poll begun before it reached Redis could not undo', () => {
  // Seed 2237878 (all 75 actions; dropping any one lets it pass; no fault, only requests longer than
  // the 5 s upstream timeout), the check's: node 2's request 6 on replica-0 got Kong's 504 at 6,254 ms;
  // node 1's poll of replica-0 began at 6,254.5 (after the 504), answered up at 6,255.5 and reached
  // Redis at 6,256.5, before the marking, which Redis applied at 6,258 dated on arrival: that poll is
  // older news (docs/reliability.md: a poll begun after the failure that answered before the marking
  // reached the store is overwritten by it), replica-0 down until the next poll. Node 0's 504 from
  // replica-1 (request 16, 6,265 ms) marked it down too; node 0's request at 6,520 read both down
  // and the health filter failed open onto replica-1, no poll of either begun since. The check took
  // replica-0 for up: it undid the marking by any poll begun after the 504, not after the marking
  // reached the store.
  it('seed 2237878: the other replica held down by a marking a poll begun after its 504 could not undo', async () => {
    await holds(
      2237878,
      {
        nodes: 3,
        replicas: 2,
        maxLoadedAdapters: 1,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math', 'law'],
        loadMs: 800,
        decodeMsPerStep: 100,
        coldLoadsPerMinute: 1000,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 1000,
        spanMs: 9548,
        queueTimeoutMs: 2218,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 500,
        maxNumSeqs: 4,
        sloClasses: [
          { name: 'interactive', ttft_ms: 1000, priority: 0 },
          { name: 'batch', ttft_ms: 52206, priority: -1 },
        ],
      },
      [
        { at: 31, kind: 'request', node: 1, adapter: 1, tokens: 6, prompt: 99 },
        { at: 276, kind: 'request', node: 2, adapter: -1, tokens: 2, prompt: 1262 },
        { at: 317, kind: 'request', node: 0, adapter: 1, tokens: 56, prompt: 1948, cls: 'interactive' },
        { at: 380, kind: 'request', node: 2, adapter: 2, tokens: 2, prompt: 1789 },
        { at: 447, kind: 'request', node: 0, adapter: 4, tokens: 5, prompt: 1543 },
        { at: 503, kind: 'request', node: 2, adapter: 2, tokens: 93, prompt: 792 },
        { at: 505, kind: 'request', node: 1, adapter: 0, tokens: 1, prompt: 175 },
        { at: 530, kind: 'request', node: 0, adapter: 1, tokens: 27, prompt: 1069, cls: 'interactive' },
        { at: 800, kind: 'request', node: 0, adapter: 0, tokens: 25, prompt: 1324, cls: 'interactive' },
        { at: 1015, kind: 'request', node: 2, adapter: 5, tokens: 3, prompt: 34 },
        { at: 1051, kind: 'request', node: 0, adapter: 6, tokens: 54, prompt: 1026, cls: 'interactive' },
        { at: 1066, kind: 'request', node: 1, adapter: 3, tokens: 6, prompt: 1869 },
        { at: 1124, kind: 'request', node: 2, adapter: 5, tokens: 5, prompt: 137 },
        { at: 1140, kind: 'request', node: 0, adapter: 0, tokens: 4, prompt: 930 },
        { at: 1207, kind: 'request', node: 1, adapter: 2, tokens: 6, prompt: 1379 },
        { at: 1263, kind: 'request', node: 0, adapter: -1, tokens: 50, prompt: 1951, cls: 'interactive' },
        { at: 1406, kind: 'request', node: 2, adapter: -1, tokens: 5, prompt: 1671 },
        { at: 1444, kind: 'request', node: 0, adapter: 6, tokens: 4, prompt: 1759 },
        { at: 1480, kind: 'request', node: 0, adapter: 5, tokens: 33, prompt: 1638, cls: 'interactive' },
        { at: 1625, kind: 'request', node: 0, adapter: 6, tokens: 28, prompt: 1552, cls: 'interactive' },
        { at: 1781, kind: 'request', node: 1, adapter: 0, tokens: 5, prompt: 142 },
        { at: 1820, kind: 'request', node: 1, adapter: 7, tokens: 4, prompt: 877 },
        { at: 1836, kind: 'request', node: 0, adapter: 2, tokens: 26, prompt: 1432, cls: 'interactive' },
        { at: 1883, kind: 'request', node: 0, adapter: 1, tokens: 1, prompt: 1957 },
        { at: 2021, kind: 'request', node: 0, adapter: 3, tokens: 49, prompt: 1428, cls: 'interactive' },
        { at: 2144, kind: 'request', node: 0, adapter: 6, tokens: 49, prompt: 1058, cls: 'interactive' },
        { at: 2258, kind: 'request', node: 0, adapter: 5, tokens: 30, prompt: 1549, cls: 'interactive' },
        { at: 2524, kind: 'request', node: 0, adapter: 5, tokens: 44, prompt: 1110, cls: 'interactive' },
        { at: 2539, kind: 'request', node: 0, adapter: -1, tokens: 2, prompt: 167, cls: 'batch' },
        { at: 2552, kind: 'request', node: 0, adapter: -1, tokens: 3, prompt: 131, cls: 'batch' },
        { at: 2681, kind: 'request', node: 0, adapter: 1, tokens: 34, prompt: 1115, cls: 'interactive' },
        { at: 2808, kind: 'request', node: 0, adapter: 3, tokens: 29, prompt: 1832, cls: 'interactive' },
        { at: 2918, kind: 'request', node: 0, adapter: 2, tokens: 40, prompt: 1489, cls: 'interactive' },
        { at: 3076, kind: 'request', node: 0, adapter: 2, tokens: 52, prompt: 1272, cls: 'interactive' },
        { at: 3278, kind: 'request', node: 0, adapter: 1, tokens: 49, prompt: 1129, cls: 'interactive' },
        { at: 3424, kind: 'request', node: 0, adapter: 0, tokens: 60, prompt: 1265, cls: 'interactive' },
        { at: 3524, kind: 'request', node: 0, adapter: 4, tokens: 32, prompt: 1612, cls: 'interactive' },
        { at: 3741, kind: 'request', node: 0, adapter: 4, tokens: 33, prompt: 1737, cls: 'interactive' },
        { at: 4029, kind: 'request', node: 0, adapter: -1, tokens: 30, prompt: 1340, cls: 'interactive' },
        { at: 4220, kind: 'request', node: 0, adapter: 3, tokens: 29, prompt: 1190, cls: 'interactive' },
        { at: 4452, kind: 'request', node: 0, adapter: 6, tokens: 52, prompt: 1163, cls: 'interactive' },
        { at: 4655, kind: 'request', node: 0, adapter: -1, tokens: 54, prompt: 1352, cls: 'interactive' },
        { at: 4831, kind: 'request', node: 0, adapter: 2, tokens: 35, prompt: 1750, cls: 'interactive' },
        { at: 5129, kind: 'request', node: 0, adapter: 2, tokens: 23, prompt: 1550, cls: 'interactive' },
        { at: 5230, kind: 'request', node: 1, adapter: 3, tokens: 3, prompt: 1809 },
        { at: 5333, kind: 'request', node: 0, adapter: 5, tokens: 34, prompt: 1182, cls: 'interactive' },
        { at: 5436, kind: 'request', node: 0, adapter: 7, tokens: 29, prompt: 1051, cls: 'interactive' },
        { at: 5570, kind: 'request', node: 0, adapter: 0, tokens: 57, prompt: 1183, cls: 'interactive' },
        { at: 5779, kind: 'request', node: 0, adapter: 0, tokens: 47, prompt: 1103, cls: 'interactive' },
        { at: 5785, kind: 'request', node: 1, adapter: 4, tokens: 4, prompt: 329 },
        { at: 5789, kind: 'request', node: 2, adapter: 4, tokens: 2, prompt: 1103 },
        { at: 5794, kind: 'request', node: 0, adapter: -1, tokens: 3, prompt: 51, cls: 'batch' },
        { at: 5881, kind: 'request', node: 0, adapter: 3, tokens: 33, prompt: 1571, cls: 'interactive' },
        { at: 6077, kind: 'request', node: 0, adapter: 4, tokens: 20, prompt: 1883, cls: 'interactive' },
        { at: 6241, kind: 'request', node: 0, adapter: -1, tokens: 42, prompt: 1122, cls: 'interactive' },
        { at: 6416, kind: 'request', node: 0, adapter: 2, tokens: 45, prompt: 1379, cls: 'interactive' },
        { at: 6520, kind: 'request', node: 0, adapter: 1, tokens: 51, prompt: 1143, cls: 'interactive' },
        { at: 6650, kind: 'request', node: 0, adapter: 0, tokens: 53, prompt: 1809, cls: 'interactive' },
        { at: 6797, kind: 'request', node: 0, adapter: 4, tokens: 24, prompt: 1868, cls: 'interactive' },
        { at: 6963, kind: 'request', node: 0, adapter: 1, tokens: 60, prompt: 1629, cls: 'interactive' },
        { at: 7129, kind: 'request', node: 0, adapter: 3, tokens: 52, prompt: 1690, cls: 'interactive' },
        { at: 7270, kind: 'request', node: 0, adapter: -1, tokens: 21, prompt: 1356, cls: 'interactive' },
        { at: 7465, kind: 'request', node: 0, adapter: 2, tokens: 40, prompt: 1381, cls: 'interactive' },
        { at: 7591, kind: 'request', node: 0, adapter: 7, tokens: 44, prompt: 1959, cls: 'interactive' },
        { at: 7838, kind: 'request', node: 0, adapter: 7, tokens: 60, prompt: 1145, cls: 'interactive' },
        { at: 8050, kind: 'request', node: 0, adapter: 7, tokens: 59, prompt: 1402, cls: 'interactive' },
        { at: 8159, kind: 'request', node: 0, adapter: 4, tokens: 29, prompt: 1502, cls: 'interactive' },
        { at: 8268, kind: 'request', node: 0, adapter: 2, tokens: 38, prompt: 1485, cls: 'interactive' },
        { at: 8375, kind: 'request', node: 0, adapter: 6, tokens: 59, prompt: 1090, cls: 'interactive' },
        { at: 8477, kind: 'request', node: 0, adapter: -1, tokens: 55, prompt: 1483, cls: 'interactive' },
        { at: 8742, kind: 'request', node: 0, adapter: 2, tokens: 47, prompt: 1064, cls: 'interactive' },
        { at: 8898, kind: 'request', node: 0, adapter: 7, tokens: 43, prompt: 2000, cls: 'interactive' },
        { at: 9147, kind: 'request', node: 0, adapter: 1, tokens: 43, prompt: 1638, cls: 'interactive' },
        { at: 9302, kind: 'request', node: 0, adapter: 3, tokens: 55, prompt: 1190, cls: 'interactive' },
        { at: 9530, kind: 'request', node: 0, adapter: 3, tokens: 38, prompt: 1707, cls: 'interactive' },
      ],
    );
  }, 60_000);
});

describe('every request answered: requests that come after the span', () => {
  // Seed 2401991 (--keep 2,3,13,17,18; failed on f89a80c and, without its client draws, on 1470bf12
  // before it): a false alarm of the world's run, not a router bug. The shape of dst/reach.ts
  // `ownRegistrationAfterEmptying` drew its pressing requests in [pushAt + node_ttl_ms, sendAt + hop]
  // with the span set to its end: a window upside down when the hop is shorter than the grace after
  // the push, so they came at 7086-7204 ms, past the span of 7085 ms. The tail (70 s, until no request
  // is under way) then stopped at 7085 ms, before they came, and the settling's 3 s ended while node
  // 0's two requests (math, team,a) were still loading: "2 request(s) unanswered 70 s after the last
  // came" at 10085 ms. Given the span, they are answered at 10112 and 10306 ms. The run now lasts
  // until the last action came (dst/world.ts).
  it('seed 2401991: requests that come after the span get the whole tail to be answered', async () => {
    await holds(
      2401991,
      {
        nodes: 3,
        replicas: 3,
        maxLoadedAdapters: 4,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math', 'law'],
        loadMs: 1500,
        decodeMsPerStep: 100,
        coldLoadsPerMinute: 1000,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 0,
        spanMs: 7085,
        queueTimeoutMs: 4000,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 2000,
        sloClasses: [
          { name: 'interactive', ttft_ms: 1000, priority: 0 },
          { name: 'batch', ttft_ms: 2500, priority: -1 },
        ],
      },
      [
        { at: 258, kind: 'request', node: 0, adapter: 1, tokens: 2, prompt: 900 },
        { at: 636, kind: 'request', node: 1, adapter: 0, tokens: 3, prompt: 1002, cls: 'batch' },
        { at: 5106, kind: 'flushall' },
        { at: 7090, kind: 'request', node: 0, adapter: 6, tokens: 1, prompt: 1998, sourceMs: 93 },
        { at: 7091, kind: 'request', node: 0, adapter: 2, tokens: 3, prompt: 1961, exit: true },
      ],
    );
  }, 60_000);
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
});

describe('a replica Kong could not reach, on a node whose wall clock was stepped back', () => {
  // Seed 2902860 (--keep 0,1,2,21,22,23,32), the kong-mark check's: node 0's wall clock was stepped
  // back 141 ms at 1,077 ms (a skew correction) and a Sentinel switch lost a write at 1,083, node 0
  // deciding alone by 1,100 (the marking reached its local store only). Its poll of replica-2 begun at 1,034.9 answered up; replica-2 restarted
  // at 1,100 and Kong's 502 for node 0's request 3 reached the log phase then. The local store dated
  // the marking by the stepped clock (959) and dropped it as older than that poll's start (1,034.9,
  // before the step), so node 0's request at 1,475 read replica-2 up and went there, no poll begun
  // since having answered. The memory store now orders a poll and a marking of one process on its
  // monotonic clock, which a step does not move.
  it('seed 2902860: a marking made after a step back of the clock holds over a poll begun before it', async () => {
    await holds(
      2902860,
      {
        nodes: 3,
        replicas: 3,
        maxLoadedAdapters: 4,
        adapters: ['sql', 'chat', 'team,a', 'team'],
        loadMs: 1500,
        decodeMsPerStep: 100,
        coldLoadsPerMinute: 1000,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 1000,
        spanMs: 4836,
        queueTimeoutMs: 2000,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 500,
        maxNumSeqs: 4,
        prefetch: { intervalMs: 500, halfLifeMs: 10000, loadsPerMinute: 30, hysteresis: 1, evictFactor: 1 },
      },
      [
        { at: 41, kind: 'request', node: 1, adapter: -1, tokens: 6, prompt: 912 },
        { at: 59, kind: 'request', node: 0, adapter: 1, tokens: 3, prompt: 1343 },
        { at: 100, kind: 'request', node: 0, adapter: -1, tokens: 23, prompt: 1424 },
        { at: 1077, kind: 'skew', node: 0, ms: -141 },
        { at: 1083, kind: 'switch', lost: 1 },
        { at: 1100, kind: 'replica-restart', replica: 2, downMs: 810 },
        { at: 1475, kind: 'request', node: 0, adapter: -1, tokens: 58, prompt: 1310 },
      ],
    );
  }, 60_000);
});

describe('a request decided again on the newest runtime, past one sharing its lease prefix', () => {
  // Seed 3129582 (--keep 8,10,11,15,16,17,18,19,25,26,27,28,29,30,31,32,33), the max_in_flight
  // check's: node 0's batch request 3 (came at 780 on runtime n0g0) waited for room while a record
  // change to other state (860) made runtime n0g0r1 and one to the same state (1,597) its successor,
  // sharing its lease prefix and sequence. Replaced by other state, request 3 was decided again on
  // the runtime current then, the same-state successor, and sent to replica-1 at 1,877. Batch
  // request 6 had come at 1,332 on n0g0r1 (node 0 cut off from Redis, deciding alone) and was
  // decided there, on its views read alone at 1,360, at 2,361: request 3's lease is the successor's,
  // which no view it read could show. The check named a request's decider by its lease prefix, the
  // first runtime with it (n0g0r1 for both), and so held request 6 to request 3 as its own runtime's.
  // It now names the runtime that handed out the lease id.
  it('seed 3129582: a lease of a same-state successor is not its predecessor decision’s own', async () => {
    await holds(
      3129582,
      {
        nodes: 3,
        replicas: 2,
        maxLoadedAdapters: 1,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math', 'law', 'med', 'fin', 'bio'],
        loadMs: 800,
        decodeMsPerStep: 50,
        coldLoadsPerMinute: 1000,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 1000,
        spanMs: 4282,
        staticAdapters: ['sql,chat'],
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 500,
        sloClasses: [
          { name: 'interactive', ttft_ms: 1000, priority: 0 },
          { name: 'batch', ttft_ms: 2500, priority: -1, max_in_flight: 1 },
        ],
        configChanges: { retainEveryMs: 1000, staleMs: 2405 },
      },
      [
        { at: 713, kind: 'request', node: 0, adapter: 3, tokens: 4, prompt: 1289, cls: 'batch' },
        {
          at: 779,
          kind: 'request',
          node: 0,
          adapter: 8,
          tokens: 6,
          prompt: 1768,
          cls: 'interactive',
          onOldConfig: true,
        },
        { at: 780, kind: 'request', node: 0, adapter: 2, tokens: 4, prompt: 1605, cls: 'batch' },
        { at: 782, kind: 'slow-path', node: 0, replica: 1, ms: 741, hopMs: 2067 },
        { at: 809, kind: 'config-change', node: 0, replicas: [1] },
        { at: 822, kind: 'partition', node: 0, ms: 648 },
        { at: 860, kind: 'record-change', otherState: true, gapMs: 87 },
        { at: 929, kind: 'config-change', node: 2, replicas: [1] },
        {
          at: 1252,
          kind: 'request',
          node: 2,
          adapter: -1,
          tokens: 19,
          prompt: 299,
          cls: 'batch',
          onOldConfig: true,
        },
        { at: 1301, kind: 'request', node: 0, adapter: 10, tokens: 5, prompt: 259, cls: 'batch' },
        { at: 1332, kind: 'request', node: 0, adapter: -1, tokens: 12, prompt: 167, cls: 'batch' },
        { at: 1345, kind: 'request', node: 0, adapter: -1, tokens: 29, prompt: 327, cls: 'batch' },
        { at: 1583, kind: 'request', node: 2, adapter: 5, tokens: 5, prompt: 1747, cls: 'interactive' },
        { at: 1583, kind: 'request', node: 1, adapter: 2, tokens: 1, prompt: 33, onOldConfig: true },
        { at: 1589, kind: 'request', node: 0, adapter: 0, tokens: 2, prompt: 750, cls: 'interactive' },
        { at: 1597, kind: 'record-change', otherState: false, gapMs: 1283 },
        { at: 2860, kind: 'request', node: 1, adapter: 5, tokens: 3, prompt: 1311, cls: 'interactive' },
      ],
    );
  }, 60_000);
});

describe('a load lock of a process that died after a FLUSHALL, before its first heartbeat', () => {
  // Seed 3142528 (--keep 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,19,20,21,22,23,24,25,26,27): node 2's load of
  // `team,a` on replica-1 (limit 2) was under way when a FLUSHALL at 236 ms emptied Redis (its `loading`
  // entry with it); node 1 then took load locks for `bio` and `a` there (262, 268 ms: two free slots to
  // the store) and its process restarted at 451 ms, before its first heartbeat to the emptied state. The
  // replica landed all three (937, 1,737, 2,537 ms): 3 for a limit of 2. The dead process was in no
  // node set, so its load locks were not ended as a silent node's after `node_ttl_ms`, only by their
  // TTL (8,262 ms): until then the store kept both `loading`, which no trim takes, and nobody's
  // after-load check ran ("over the limit for 5911.9 ms"). A lock taken now enters its node in the
  // node set if absent, so a holder that never heartbeats is found silent.
  it('seed 3142528: a dead holder of a load lock taken after a FLUSHALL is found silent', async () => {
    await holds(
      3142528,
      {
        nodes: 3,
        replicas: 2,
        maxLoadedAdapters: 2,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math', 'law', 'med', 'fin', 'bio', 'geo'],
        loadMs: 800,
        decodeMsPerStep: 100,
        coldLoadsPerMinute: 1000,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 0,
        spanMs: 3736,
        staticAdapters: ['sql,chat'],
        queueTimeoutMs: 4000,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 2000,
        prefetch: { intervalMs: 1000, halfLifeMs: 3000, loadsPerMinute: 30, hysteresis: 1, evictFactor: 1 },
      },
      [
        { at: 92, kind: 'request', node: 0, adapter: 5, tokens: 36, prompt: 1409 },
        { at: 121, kind: 'request', node: 2, adapter: 2, tokens: 4, prompt: 1128 },
        { at: 189, kind: 'request', node: 1, adapter: 7, tokens: 3, prompt: 689 },
        { at: 232, kind: 'request', node: 1, adapter: 10, tokens: 6, prompt: 672 },
        { at: 233, kind: 'request', node: 1, adapter: 4, tokens: 6, prompt: 1881 },
        { at: 233, kind: 'request', node: 1, adapter: 4, tokens: 1, prompt: 473 },
        { at: 235, kind: 'request', node: 1, adapter: 10, tokens: 1, prompt: 307 },
        { at: 236, kind: 'flushall' },
        { at: 236, kind: 'slow-path', node: 1, replica: 0, ms: 720, hopMs: 1637 },
        { at: 360, kind: 'request', node: 0, adapter: 11, tokens: 4, prompt: 1107 },
        { at: 386, kind: 'load-fail', replica: 0, count: 4, failure: 'engine' },
        { at: 451, kind: 'process-restart', node: 1 },
        { at: 557, kind: 'slow', node: 2, ms: 885, slowMs: 420 },
        { at: 970, kind: 'request', node: 1, adapter: 12, tokens: 6, prompt: 162 },
        { at: 1186, kind: 'request', node: 2, adapter: 4, tokens: 3, prompt: 303 },
        { at: 1706, kind: 'request', node: 2, adapter: 11, tokens: 6, prompt: 162 },
        { at: 1707, kind: 'request', node: 1, adapter: 0, tokens: 3, prompt: 1613 },
        { at: 1756, kind: 'request', node: 1, adapter: 9, tokens: 5, prompt: 1079 },
        { at: 2321, kind: 'request', node: 2, adapter: 3, tokens: 6, prompt: 1802 },
        { at: 2457, kind: 'request', node: 0, adapter: 1, tokens: 6, prompt: 1933 },
        { at: 2477, kind: 'request', node: 0, adapter: 3, tokens: 6, prompt: 1852 },
        { at: 2783, kind: 'request', node: 0, adapter: 1, tokens: 4, prompt: 1972 },
        { at: 3099, kind: 'request', node: 0, adapter: 5, tokens: 3, prompt: 1051 },
        { at: 3539, kind: 'request', node: 2, adapter: 9, tokens: 6, prompt: 1613 },
      ],
    );
  }, 60_000);
});

describe("a same-state successor's local copy knows its predecessor's replicas", () => {
  // Seed 3044962 (--keep 6,10,12,14,20,21), the kong-mark check's: Redis restarted empty at 459
  // (down 2,860 ms), node 1 deciding alone. Node 1's configuration changed at 544 to list replica-1
  // only (the previous one, listing all three, stays a stale worker's) and a `redis` record change
  // on the same state at 573 made runtime n1g0r1, whose local copy had only the new configuration's
  // replica registered: replica-0 and replica-2 were registered on its predecessor alone. Replica-1
  // restarted at 928; Kong's 502 for request 1 marked it down on n1g0r1 at 1,515. The stale
  // worker's request at 1,523, on the old configuration, was decided on n1g0r1 (`current()`), read
  // views of replica-1 only (the others unknown there), and the health filter, failing open, sent
  // it to replica-1 while replica-0 and replica-2 were up. The successor's local copy now takes the
  // predecessor's replicas (FailoverFleetStore.succeed), as Redis has them for both.
  it('seed 3044962: a stale worker after a same-state record change avoids a replica Kong could not reach', async () => {
    await holds(
      3044962,
      {
        nodes: 3,
        replicas: 3,
        maxLoadedAdapters: 2,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math', 'law', 'med', 'fin', 'bio'],
        loadMs: 200,
        decodeMsPerStep: 50,
        coldLoadsPerMinute: 6,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 1000,
        spanMs: 2000,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 2000,
        sloClasses: [
          { name: 'interactive', ttft_ms: 1000, priority: 0 },
          { name: 'batch', ttft_ms: 2500, priority: -1, max_in_flight: 2 },
        ],
        configChanges: { retainEveryMs: 10000, staleMs: 2316 },
      },
      [
        { at: 459, kind: 'redis-restart', empty: true, downMs: 2860 },
        { at: 544, kind: 'config-change', node: 1, replicas: [1] },
        { at: 573, kind: 'record-change', otherState: false, gapMs: 147 },
        { at: 928, kind: 'replica-restart', replica: 1, downMs: 1548 },
        { at: 1515, kind: 'request', node: 1, adapter: -1, tokens: 29, prompt: 21, cls: 'batch' },
        {
          at: 1523,
          kind: 'request',
          node: 1,
          adapter: -1,
          tokens: 13,
          prompt: 312,
          cls: 'batch',
          onOldConfig: true,
        },
      ],
    );
  }, 60_000);
});

describe("an unseen router's request run beside a lease of the unloader's own", () => {
  // Seed 3044822 (--keep 0,1,2,3,4,5,6,7,8,10,11,12,13,14,15): node 1, cut off from Redis 535-3,180 ms
  // and still deciding alone after (its probe had not recovered), ran `team,a` on replica-1 from
  // 2,371 to 2,717.5 ms beside node 0's own request there (2,378-3,219.5 ms, leased on database 1,
  // where a record change at 1,353 ms had moved node 0). Node 0's poll at 2,408 ms read `team,a`
  // busy; the lease it had held since before the poll explained the reading, so no unseen hold
  // started (docs/reliability.md, "An adapter someone unseen routes is held", not covered: the word
  // names the adapters, not how many requests of each). Node 0 read it idle at 3,468.8 ms (its word,
  // the unload granted under its lock) and unloaded it; node 1's next request reached the engine at
  // 3,469.8 ms, 1 ms before the unload. The router did what the docs say; the check took the 2,408 ms
  // read for one that held the adapter: a gap in the check, not in src/.
  it('seed 3044822: a read its own lease explained held nothing, the next unseen request is chance', async () => {
    await holds(
      3044822,
      {
        nodes: 3,
        replicas: 3,
        maxLoadedAdapters: 1,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math', 'law', 'med'],
        loadMs: 800,
        decodeMsPerStep: 100,
        coldLoadsPerMinute: 6,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 1000,
        spanMs: 2000,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 500,
      },
      [
        { at: 178, kind: 'request', node: 1, adapter: -1, tokens: 2, prompt: 591 },
        { at: 309, kind: 'request', node: 2, adapter: 4, tokens: 3, prompt: 1478 },
        { at: 527, kind: 'request', node: 1, adapter: 2, tokens: 1, prompt: 1219 },
        { at: 535, kind: 'partition', node: 1, ms: 2645 },
        { at: 639, kind: 'request', node: 0, adapter: 3, tokens: 3, prompt: 846 },
        { at: 753, kind: 'request', node: 2, adapter: 1, tokens: 1, prompt: 1657 },
        { at: 931, kind: 'request', node: 2, adapter: 4, tokens: 3, prompt: 335 },
        { at: 1078, kind: 'request', node: 0, adapter: 2, tokens: 6, prompt: 615 },
        { at: 1136, kind: 'request', node: 0, adapter: 6, tokens: 2, prompt: 1616 },
        { at: 1353, kind: 'record-change', otherState: true, gapMs: 6 },
        { at: 1721, kind: 'request', node: 2, adapter: 8, tokens: 2, prompt: 250 },
        { at: 1750, kind: 'request', node: 1, adapter: 6, tokens: 23, prompt: 931 },
        { at: 1914, kind: 'request', node: 1, adapter: 2, tokens: 3, prompt: 1682 },
        { at: 1981, kind: 'request', node: 0, adapter: 4, tokens: 3, prompt: 1378 },
        { at: 1992, kind: 'request', node: 0, adapter: 1, tokens: 1, prompt: 972 },
      ],
    );
  }, 60_000);
});
