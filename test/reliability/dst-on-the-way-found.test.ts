/**
 * Schedules the simulation found breaking "no unload of a busy adapter" through a request routed
 * on a slow path and still on its way (dst/request-routing.ts `onTheWay`), kept as written: each
 * replays exactly and must hold every invariant now.
 */
import { runSchedule } from '../../dst/run';
import type { Schedule } from '../../dst/schedule';

async function holds(seed: number, world: Schedule['world'], actions: Schedule['actions']): Promise<void> {
  expect((await runSchedule({ seed, world, actions })).violation).toBeUndefined();
}

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
});
