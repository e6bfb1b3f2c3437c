/**
 * Kept schedules (./holds.ts) for "cold loads within the budget per window" (docs/reliability.md, "The
 * cold-load budget"): the shares nodes grant alone, node counts, record changes and Sentinel switches.
 */
import { runSchedule } from '../../../dst/run';
import type { Schedule } from '../../../dst/schedule';
import { WORLD, holds } from './holds';

/** The budget seeds' world: three replicas of four slots, a budget of 3 cold loads a minute. */
const BUDGET_WORLD: Schedule['world'] = {
  ...WORLD,
  maxLoadedAdapters: 4,
  coldLoadsPerMinute: 3,
  spanMs: 2000,
  upstreamTimeoutMs: 5000,
};

describe('schedules the simulation found', () => {
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

  // Seed 3454282 (--keep 1,2,3,9,19,20,26,29,32,33,34, the lead's sweep of main 1fc0402f): every
  // node's lora-poller is a plugin of its own whose record differs from the router's in timeout
  // only, so node 2's configuration change at 3,557 ms replaced its runtime by one on the same
  // state. Node 1 (cut off at 849 ms) and node 0 (at 2,597 ms) had fallen silent past node_ttl_ms;
  // the replaced store held the count at 3 for the window, the new one read 1 from its own link
  // and, cut off at 4,337 ms, granted the whole budget of 3 alone: 7 load calls within 5.25 s for
  // 6 allowed. A runtime replaced on the same state now keeps the count as its predecessor held it.
  it('seed 3454282: a runtime replaced on the same state keeps the node count held for the window', async () => {
    await holds(
      3454282,
      {
        nodes: 3,
        replicas: 2,
        maxLoadedAdapters: 4,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math', 'law', 'med', 'fin', 'bio', 'geo'],
        loadMs: 800,
        decodeMsPerStep: 100,
        coldLoadsPerMinute: 3,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 0,
        spanMs: 5037,
        staticAdapters: ['sql,chat'],
        queueTimeoutMs: 4000,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 500,
        sloClasses: [
          { name: 'interactive', ttft_ms: 1000, priority: 0 },
          { name: 'batch', ttft_ms: 2500, priority: -1 },
        ],
        configChanges: { retainEveryMs: 1000, staleMs: 1178, poller: { lagMs: 1475, timeout: 1 } },
      },
      [
        { at: 2, kind: 'request', node: 1, adapter: 2, tokens: 3, prompt: 1184, onOldConfig: true },
        {
          at: 3,
          kind: 'request',
          node: 1,
          adapter: 4,
          tokens: 5,
          prompt: 1679,
          cls: 'interactive',
          onOldConfig: true,
        },
        {
          at: 17,
          kind: 'request',
          node: 1,
          adapter: 11,
          tokens: 6,
          prompt: 698,
          cls: 'interactive',
          onOldConfig: true,
        },
        { at: 849, kind: 'partition', node: 1, ms: 5135 },
        { at: 2597, kind: 'partition', node: 0, ms: 3387 },
        { at: 2769, kind: 'request', node: 0, adapter: 10, tokens: 2, prompt: 940 },
        { at: 3557, kind: 'config-change', node: 2, replicas: [0, 1] },
        { at: 4337, kind: 'partition', node: 2, ms: 1647 },
        {
          at: 4527,
          kind: 'request',
          node: 2,
          adapter: 9,
          tokens: 3,
          prompt: 1945,
          cls: 'batch',
          onOldConfig: true,
        },
        { at: 4534, kind: 'request', node: 2, adapter: 8, tokens: 6, prompt: 1925, cls: 'batch' },
        {
          at: 4780,
          kind: 'request',
          node: 2,
          adapter: 5,
          tokens: 1,
          prompt: 303,
          cls: 'batch',
          onOldConfig: true,
        },
      ],
    );
  }, 30_000);
});
