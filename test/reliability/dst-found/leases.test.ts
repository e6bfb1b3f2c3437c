/**
 * Kept schedules (./holds.ts) for "no lease left open after quiescence" (docs/reliability.md):
 * releases across Sentinel switches, Redis restarts, record changes and slow links.
 */
import { runSchedule } from '../../../dst/run';
import { WORLD, holds } from './holds';

describe('schedules the simulation found', () => {
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
});
