/**
 * Kept schedules (./holds.ts) for "the cold-load budget goes to loads" (docs/reliability.md, "The
 * cold-load budget"): spends, refunds and re-published units the store and the check count.
 */
import { WORLD, holds } from './holds';

describe('schedules the simulation found', () => {
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
