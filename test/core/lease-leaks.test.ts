/**
 * Leases left open in Redis by the randomized fault run (issue 24, invariant (iii)): a release
 * Redis acknowledged and then lost in a restart with persistence, and releases a runtime retired
 * for another database never replayed. Real redis-server, a TCP hop to cut a node's link.
 */
import { waitFor } from '../../harness/wait';
import { redisRuntimes, SPEC, U } from '../helpers/runtime-harness';

const h = redisRuntimes('ll');
const { prefix, poll, runtime, take, openIn } = h;
const same = (a: string[], b: string[]) => JSON.stringify(a) === JSON.stringify(b);

describe('a release Redis acknowledged and then lost in a restart', () => {
  it('is not left open: the node drops its leases Redis came back with that it no longer holds', async () => {
    // The chaos run (seed 1, +106.5 s): Redis restarted with persistence just after a `redis`
    // record change; a snapshot taken before a release brought the lease back, and its node,
    // alive and heartbeating, kept it open until lease_max_age_ms.
    const p = prefix();
    const proxy = await h.proxy();
    const rt = runtime({ redis: h.redis.config(p, { port: proxy.port, timeout: 2000, node_ttl_ms: 1000 }) });
    await rt.store.upsertReplica(SPEC);
    await rt.store.applySnapshot(U, poll());
    const running = await take(rt);
    const ended = await take(rt);
    // The snapshot (RDB, or an AOF fsynced every second) predates the release.
    await h.redis.command(['SAVE']);
    expect(await ended.release(200)).toMatchObject({ id: ended.id });
    expect(await openIn(p)).toEqual([running.id]);
    // The node's link is cut over the restart, so the test sees what Redis came back with first.
    proxy.cut('refuse');
    await h.redis.stop();
    await h.redis.start();
    expect(await openIn(p)).toEqual([ended.id, running.id].sort()); // the release was lost
    proxy.restore();
    // The node learns of the restart from its next call or heartbeat (a changed run_id).
    await waitFor(
      async () => same(await openIn(p), [running.id]),
      10_000,
      `only ${running.id} open in Redis after the restart`,
    );
    await waitFor(() => rt.store.mode?.() === 'redis', 10_000, 'the node shares decisions');
    const [v] = await rt.store.views([U], { name: 'a' });
    expect(v!.adapter?.inFlight).toBe(1);
    expect(await running.release(200)).toMatchObject({ id: running.id });
    expect(await openIn(p)).toEqual([]);
  }, 30_000);
});

describe('a release lost in a restart, then a `redis` record change on the same state', () => {
  it('is dropped by the successor, whose own connection never saw the server change', async () => {
    // The chaos run (seed 3, +99.8 s and +102.0 s): the predecessor saw the restart and was
    // replaced (it must not drop leases its successor holds under the same node id); the
    // successor connected to the restarted server only, so nothing told it to look.
    const p = prefix();
    // Heartbeats 15 s apart: the predecessor makes no call between the restart and its retirement.
    const old = runtime({ redis: h.redis.config(p, { timeout: 2000, node_ttl_ms: 60_000 }) });
    await old.store.upsertReplica(SPEC);
    await old.store.applySnapshot(U, poll());
    const running = await take(old);
    const ended = await take(old);
    await h.redis.command(['SAVE']);
    expect(await ended.release(200)).toMatchObject({ id: ended.id });
    await h.redis.stop();
    await h.redis.start();
    expect(await openIn(p)).toEqual([ended.id, running.id].sort());
    // The operator changes only timeout_ms: same state, same node id and lease-id counter.
    const next = runtime({
      redis: h.redis.config(p, { timeout: 2500, node_ttl_ms: 60_000 }),
      leasePrefix: old.leasePrefix,
      leaseSeq: old.leaseSeq,
    });
    // The predecessor keeps its running request's lease until it is given back.
    const retiring = old.retire(next);
    await waitFor(
      async () => same(await openIn(p), [running.id]),
      10_000,
      `only ${running.id} open in Redis after the record change`,
    );
    expect(await running.release(200)).toMatchObject({ id: running.id });
    await retiring;
    expect(await openIn(p)).toEqual([]);
  }, 30_000);
});

describe('a runtime retired for another database while its Redis link is down', () => {
  it('leaves no lease open in the old database once the link is back', async () => {
    const [p1, p2] = [prefix(), prefix()];
    const proxy = await h.proxy();
    const old = runtime({ redis: h.redis.config(p1, { port: proxy.port, timeout: 300 }) });
    await old.store.upsertReplica(SPEC);
    await old.store.applySnapshot(U, poll());
    const ended = await take(old);
    const running = await take(old);
    proxy.cut('refuse');
    // Ends while Redis is unreachable: its release waits to be replayed.
    expect(await ended.release(200)).toMatchObject({ id: ended.id });
    expect(old.store.mode?.()).toBe('local');
    // The operator points the nodes at another database (here: another prefix, the same effect).
    const next = runtime({ redis: h.redis.config(p2, { timeout: 2000 }) });
    const retiring = old.retire(next);
    // Nothing moves: the running request's lease stays where it was taken, given back there.
    expect(await openIn(p2)).toEqual([]);
    expect(await running.release(200)).toMatchObject({ id: running.id });
    proxy.restore();
    await retiring;
    await waitFor(async () => same(await openIn(p1), []), 10_000, `no lease open in the old database`);
    expect(await openIn(p2)).toEqual([]);
  }, 30_000);
});

describe('a release the old server ran but never answered before it restarted', () => {
  it('fails with the connection and is replayed on the server that lost it (dst seed 140805)', async () => {
    // The simulation answered such a release after the new server had answered other calls, and the
    // lease stayed open: one ioredis stream cannot, as this shows. The release's reply dies with the
    // old stream, the call fails, and recovery gives the lease back where the restart brought it back.
    const p = prefix();
    const proxy = await h.proxy();
    const rt = runtime({ redis: h.redis.config(p, { port: proxy.port, timeout: 2000, node_ttl_ms: 1000 }) });
    await rt.store.upsertReplica(SPEC);
    await rt.store.applySnapshot(U, poll());
    const ended = await take(rt);
    await h.redis.command(['SAVE']);
    proxy.delay(400);
    const released = ended.release(200);
    // It ran at the server; its reply is still on its way when the server stops.
    await waitFor(async () => (await openIn(p)).length === 0, 5_000, 'the release run at the server');
    await h.redis.stop();
    await h.redis.start();
    proxy.delay(0);
    expect(await openIn(p)).toEqual([ended.id]); // the restart lost it
    // Not answered by the old server: the call failed with its stream, and the node decides alone,
    // the release owed to the shared state.
    await released;
    expect(rt.store.mode?.()).toBe('local');
    await waitFor(
      async () => (await openIn(p)).length === 0,
      10_000,
      `${ended.id} given back after the restart`,
    );
    await waitFor(() => rt.store.mode?.() === 'redis', 10_000, 'the node shares decisions');
  }, 30_000);
});

describe('a runtime replaced on the same state whose successor then left for another database', () => {
  it('gives back the leases it could not release there once it drains (dst seed 556526)', async () => {
    // A replaced by B on the same state (only timeout_ms changed), then B by C on another database.
    // B holds no lease of its own and drains at once; A still holds a request, whose release fails
    // (the link cut) and is owed to the old state. A hands what it owes to B when it drains: before,
    // B had left the old state already (its link closed), the replay failed and the lease stayed
    // open until lease_max_age_ms.
    const [p1, p2] = [prefix(), prefix()];
    const proxy = await h.proxy();
    const a = runtime({ redis: h.redis.config(p1, { port: proxy.port, timeout: 300 }) });
    await a.store.upsertReplica(SPEC);
    await a.store.applySnapshot(U, poll());
    const running = await take(a);
    // The operator changes only timeout: same state (the same hop), same node id.
    const b = runtime({
      redis: h.redis.config(p1, { port: proxy.port, timeout: 400 }),
      leasePrefix: a.leasePrefix,
      leaseSeq: a.leaseSeq,
    });
    const aRetiring = a.retire(b);
    const c = runtime({ redis: h.redis.config(p2, { timeout: 2000 }) });
    await b.retire(c);
    // Time for B's leave (a ping and a prune on loopback) to end, had it not waited for A.
    await new Promise((r) => setTimeout(r, 300));
    expect(await openIn(p1)).toEqual([running.id]);
    proxy.cut('refuse');
    expect(await running.release(200)).toMatchObject({ id: running.id });
    expect(a.store.mode?.()).toBe('local'); // its release owed to the old state
    proxy.restore();
    await aRetiring;
    await waitFor(async () => same(await openIn(p1), []), 10_000, 'no lease open in the old database');
    expect(await openIn(p2)).toEqual([]);
  }, 30_000);
});
