/**
 * Replacing a runtime (a changed `redis` record) while requests run (issue 24, items 4 and 5),
 * over a real redis-server. Each test fails on the hand-over before issue 24.
 */
import { FailoverFleetStore } from '../../src/fleet/redis/failover-store';
import type { FleetRuntime } from '../../src/runtime';
import { sharedRuntime } from '../../src/runtime-registry';
import { answered, waitFor } from '../../harness/wait';
import { redisRuntimes, SPEC, U } from '../helpers/runtime-harness';

const h = redisRuntimes('rh');
const { prefix, poll, runtime, take, openIn } = h;

describe('item 4: a `redis` record change does not resurrect released leases', () => {
  it('requests ending one by one after the change leave no lease open in either store', async () => {
    const [p1, p2] = [prefix(), prefix()];
    // A timeout long enough for a loaded machine: a timed-out copy is another path (failover).
    const old = runtime({ redis: h.redis.config(p1, { timeout: 2000 }) });
    await old.store.upsertReplica(SPEC);
    await old.store.applySnapshot(U, poll());
    const leases = [];
    for (let i = 0; i < 1000; i++) leases.push(await take(old));
    const next = runtime({ redis: h.redis.config(p2, { timeout: 2000 }) });
    const retiring = old.retire(next);
    // Every request ends after the change, one after another, where its lease was taken.
    for (const l of leases) expect(await l.release(200)).toMatchObject({ id: l.id });
    // The old runtime closes once its last lease is given back.
    await retiring;
    expect(next.store.mode?.()).toBe('redis');
    expect(await openIn(p2)).toEqual([]);
    expect(await openIn(p1)).toEqual([]);
    expect(await next.store.inFlightTotal()).toBe(0);
  }, 30_000);
});

describe('item 5: retiring a runtime on the same shared state keeps its failover records', () => {
  it('a lease taken locally during an outage and a release waiting to be replayed survive a timeout_ms change', async () => {
    const p = prefix();
    const proxy = await h.proxy();
    const old = runtime({ redis: h.redis.config(p, { port: proxy.port, timeout: 200 }) });
    await old.store.upsertReplica(SPEC);
    await old.store.applySnapshot(U, poll());
    const shared = await take(old);
    proxy.cut('refuse');
    const local = await take(old); // Redis unreachable: counted only on this node
    expect(old.store.mode?.()).toBe('local');
    expect(await shared.release(200)).toMatchObject({ id: shared.id }); // to replay
    // The operator changes only timeout: same state, same node id.
    const next = runtime({
      redis: h.redis.config(p, { port: proxy.port, timeout: 300 }),
      leasePrefix: old.leasePrefix,
    });
    const retiring = old.retire(next);
    proxy.restore();
    // Redis ends up with the open local lease counted, and the ended one released.
    await waitFor(
      async () => JSON.stringify(await openIn(p)) === JSON.stringify([local.id]),
      10_000,
      `only ${local.id} open in Redis`,
    );
    await waitFor(() => next.store.mode?.() === 'redis', 10_000, 'next shares decisions');
    // Read in Redis itself: through the node, a reply past its 300 ms timeout on a stalled machine
    // falls back to the new runtime's own state, which never polled 'a' (Received undefined).
    const [v] = await answered(() => (next.store as FailoverFleetStore).shared.views([U], { name: 'a' }));
    expect(v!.adapter?.inFlight).toBe(1);
    expect(await local.release(200)).toMatchObject({ id: local.id });
    await retiring;
    expect(await openIn(p)).toEqual([]);
  }, 30_000);
});

describe('two `redis` record changes on the same shared state in a row', () => {
  it("the newest runtime keeps the oldest one's open lease in Redis, and the oldest one's release lands", async () => {
    // A replaced by B, B (idle) replaced by C: B drains at once and hands its records to C,
    // while A still holds a request. One node id: C's pruning must keep A's lease.
    const p = prefix();
    const same = (o: { timeout: number }, from?: FleetRuntime) =>
      runtime({
        redis: h.redis.config(p, o),
        ...(from && { leasePrefix: from.leasePrefix, leaseSeq: from.leaseSeq }),
      });
    const a = same({ timeout: 2000 });
    await a.store.upsertReplica(SPEC);
    await a.store.applySnapshot(U, poll());
    const l = await take(a);
    const b = same({ timeout: 2100 }, a);
    const aRetiring = a.retire(b);
    const c = same({ timeout: 2200 }, a);
    await b.retire(c);
    expect(await openIn(p)).toEqual([l.id]);
    expect((await c.store.views([U], { name: 'a' }))[0]!.adapter?.inFlight).toBe(1);
    // A drains into the runtime current on the state (C), not into B's closed store.
    expect(await l.release(200)).toMatchObject({ id: l.id });
    expect(a.store.mode?.()).toBe('redis'); // released in Redis, not left to replay
    expect(await openIn(p)).toEqual([]);
    await aRetiring;
    expect(await openIn(p)).toEqual([]);
    // C took A's records (releases to replay, spends): none of A's is left behind in B's closed store.
    expect((c.store as FailoverFleetStore).predecessor).toBeNull();
    expect(c.store.mode?.()).toBe('redis');
    expect(await c.store.inFlightTotal()).toBe(0);
  }, 30_000);
});

describe('a successor on the same shared state never reuses a lease id', () => {
  it("a request admitted after a timeout_ms change is counted beside the predecessor's running ones", async () => {
    // The chaos run's open leases: the successor keeps the node id (the lease prefix), so its
    // first ids were its predecessor's first ids; one acquire counted nothing, one release
    // ended another request's lease.
    const p = prefix();
    const old = sharedRuntime(h.redis.config(p, { timeout: 2000 }));
    h.track(old);
    await old.store.upsertReplica(SPEC);
    await old.store.applySnapshot(U, poll());
    const running = [await take(old), await take(old)];
    const next = sharedRuntime(h.redis.config(p, { timeout: 3000 }));
    h.track(next);
    expect(next).not.toBe(old);
    expect(next.leasePrefix).toBe(old.leasePrefix);
    const admitted = await take(next);
    // Three requests run: three leases open, whichever runtime took them.
    expect((await openIn(p)).length).toBe(3);
    expect((await next.store.views([U], { name: 'a' }))[0]!.adapter?.inFlight).toBe(3);
    for (const l of [...running, admitted]) expect(await l.release(200)).toMatchObject({ id: l.id });
    expect(await openIn(p)).toEqual([]);
  }, 30_000);
});

describe('a `redis` record change to other state does not reset the cold-load budget', () => {
  /** Asks `rt` for `times` cold loads of a budget of 6 a minute; how many it granted. */
  const spend = async (rt: FleetRuntime, times: number) => {
    let ok = 0;
    for (let i = 0; i < times; i++)
      if ((await rt.store.spendBudget('fleet', 6, 60_000, Date.now())) === 0) ok++;
    return ok;
  };

  it("the new database's window counts what the node spent in the old one", async () => {
    const [p1, p2] = [prefix(), prefix()];
    const old = runtime({ redis: h.redis.config(p1, { timeout: 2000 }) });
    await old.store.upsertReplica(SPEC);
    expect(await spend(old, 4)).toBe(4);
    // The operator points the nodes at another database (here: another prefix, the same effect).
    const next = runtime({ redis: h.redis.config(p2, { timeout: 2000 }) });
    await old.retire(next);
    expect(await spend(next, 6)).toBe(2);
  }, 30_000);

  it('while a decision still runs on the old state, the new state grants only what the node left of the window', async () => {
    const [p1, p2] = [prefix(), prefix()];
    const old = runtime({ redis: h.redis.config(p1, { timeout: 2000 }) });
    await old.store.upsertReplica(SPEC);
    expect(await spend(old, 4)).toBe(4);
    // A decision under way on the old runtime: the hand-over waits for it to end.
    old.decisionBegan();
    const next = runtime({ redis: h.redis.config(p2, { timeout: 2000 }) });
    await next.store.upsertReplica(SPEC);
    const retired = old.retire(next);
    // The decision under way is granted a cold load on the old state after the change.
    expect(await spend(old, 1)).toBe(1);
    // New requests go to the new state at once; it knows what this node spent in the window.
    expect(await spend(next, 6)).toBe(1);
    old.decisionEnded();
    await retired;
    expect(await spend(next, 6)).toBe(0);
  }, 30_000);
});

describe('a `redis` record change to other state unloads nothing while peers may still decide on the old one', () => {
  it('the new state unloads nothing until the hand-over has ended and two probe intervals have passed', async () => {
    // Kong pushes a configuration to its nodes in turn: for a moment some decide on the old
    // state and some on the new, and neither sees the other's leases. The 30-minute fault run
    // broke (i) so: 290 ms after a change to another database, a node unloaded an adapter a peer
    // still on the old state had just sent a request to (vLLM had it waiting).
    const [p1, p2] = [prefix(), prefix()];
    const old = runtime({ redis: h.redis.config(p1, { timeout: 2000 }) });
    await old.store.upsertReplica(SPEC);
    await old.store.applySnapshot(U, poll());
    // A decision under way on the old runtime: the hand-over waits for it.
    old.decisionBegan();
    const next = runtime({ redis: h.redis.config(p2, { timeout: 2000 }) });
    await next.store.upsertReplica(SPEC);
    await next.store.applySnapshot(U, poll());
    const retiring = old.retire(next);
    const unload = () => next.store.beginUnload(U, 'a', Date.now(), 5000);
    expect(await unload()).toBeNull(); // hand-over under way
    old.decisionEnded();
    await retiring;
    expect(await unload()).toBeNull(); // peers may still be on the old state
    const probeMs = 1000; // FleetRuntime's failover probe interval
    await new Promise((r) => setTimeout(r, 2 * probeMs + 100));
    expect(await unload()).not.toBeNull();
  }, 30_000);
});
