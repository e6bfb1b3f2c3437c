/**
 * Kept schedules (./holds.ts) for "a request proxied for an adapter finds it there" and "static
 * adapters stay" (docs/reliability.md): unload records lost to restarts and wipes, replayed load ends,
 * start-up adapters.
 */
import { holds } from './holds';

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

describe('schedules the simulation found', () => {
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

describe("a request proxied for an adapter finds it there: a dead process's request on its way, its lease lost to a flush", () => {
  // Seed 3240387 (--keep 1,13,14,15,16,24,25,26): node 0 proxies `a` to replica-1 at 4,662 ms over a
  // slow path (a hop of 2,385 ms), goes down at 4,748 ms (its process dead for 9 s) and the FLUSHALL
  // at 4,763 ms wipes its lease: no living process holds it to take it again. Nodes 1 and 2 find the
  // state emptied at 4,875 ms and hold their unloads off 2 s; node 1's request for `team,a` at
  // 6,926 ms makes room on replica-1 and Redis grants the unload of the idle `a` at 6,937 ms. Node
  // 0's request arrives after it, to a replica answering its closed connection: no client gets the
  // 404 (docs/reliability.md, "Every node notices an emptied Redis": a dead node takes nothing again;
  // the busy check's `onTheWay` already counts no dead process's request). A check gap, not the router's.
  it('seed 3240387: a 404 no client gets, its process dead and its lease wiped before the unload', async () => {
    await holds(
      3240387,
      {
        nodes: 3,
        replicas: 2,
        maxLoadedAdapters: 2,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math', 'law', 'med', 'fin', 'bio', 'geo'],
        loadMs: 1500,
        decodeMsPerStep: 50,
        coldLoadsPerMinute: 1000,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 0,
        spanMs: 7041,
        queueTimeoutMs: 4000,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 500,
        sloClasses: [
          { name: 'interactive', ttft_ms: 1000, priority: 0 },
          { name: 'batch', ttft_ms: 2500, priority: -1 },
        ],
        configChanges: { retainEveryMs: 10000, staleMs: 1227 },
      },
      [
        {
          at: 299,
          kind: 'request',
          node: 0,
          adapter: 4,
          tokens: 15,
          prompt: 973,
          gaveUp: { afterMs: 2555, unwritten: true, noticeMs: 500 },
          onOldConfig: true,
        },
        { at: 4636, kind: 'slow-path', node: 0, replica: 1, ms: 2498, hopMs: 2385 },
        { at: 4656, kind: 'request', node: 0, adapter: 4, tokens: 14, prompt: 403, sourceMs: 21 },
        { at: 4748, kind: 'node-down', node: 0, ms: 9004 },
        { at: 4763, kind: 'flushall' },
        { at: 6160, kind: 'request', node: 2, adapter: 10, tokens: 5, prompt: 244, onOldConfig: true },
        {
          at: 6881,
          kind: 'request',
          node: 2,
          adapter: 1,
          tokens: 2,
          prompt: 934,
          exit: true,
          onOldConfig: true,
        },
        {
          at: 6926,
          kind: 'request',
          node: 1,
          adapter: 2,
          tokens: 4,
          prompt: 287,
          sourceMs: 79,
          onOldConfig: true,
        },
      ],
    );
  }, 30_000);
});
