/**
 * Kept schedules (./holds.ts) for "no unload of a busy adapter" (docs/reliability.md) through a load's
 * own after-load check: a load undone under a request another node sent on an "already loaded" answer.
 */
import { runSchedule } from '../../../dst/run';
import { WORLD, holds } from './holds';

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

describe('no unload of a busy adapter: a peer on other state during a record change', () => {
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
});
