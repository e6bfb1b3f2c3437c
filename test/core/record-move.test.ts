/**
 * A route moved to another `redis` record with other replicas, through the plugins' entries (what
 * the plugin server constructs) over a real redis-server: lora-router and lora-poller move from
 * database 0 and replicas R1 to database 1 and replicas R2. No runtime takes R1 over (nothing
 * claims it on database 1), so nothing replaced the old runtime: it kept the old configuration
 * live, polled R1 and heartbeat in database 0 until the plugin server restarted. Now its plugins'
 * newer configurations supersede the old ones there, kept for the lapse grace (a worker may still
 * route through them), and then it retires: it stops polling and leaves database 0's live nodes.
 *
 * The lapse grace is at least 60 s of the process's monotonic time (node-claim.ts MIN_LAPSE_MS):
 * the test moves `performance.now` ahead (what SystemClock reads; timers still wait real time), as
 * test/helpers/clock-jump.cjs does for a plugin server.
 */
import { waitFor } from '../../harness/wait';
import { useRecordMove } from '../helpers/record-move';

const { h, replica, router, poller, nodesIn, rounds, state, pastGrace } = useRecordMove('mv');

describe('a route moved to another record with other replicas', () => {
  it('the old runtime is kept for the lapse grace, then stops polling the old replicas and leaves the old state', async () => {
    const p = h.prefix();
    const [db0, db1] = [h.redis.config(p, { database: 0 }), h.redis.config(p, { database: 1 })];
    const [r1, r2] = [await replica(), await replica()];
    const old = router(`${p}route`, db0, 1, [r1.url]).runtime;
    poller(`${p}poller`, db0, 2);
    await waitFor(async () => (await nodesIn(db0)).includes(old.leasePrefix), 5000, 'the node on database 0');
    // The operator moves the route (and its poller) to database 1, on other replicas.
    const moved = router(`${p}route`, db1, 3, [r2.url]).runtime;
    poller(`${p}poller`, db1, 4);
    expect(moved).not.toBe(old);
    await waitFor(
      async () => (await nodesIn(db1)).includes(moved.leasePrefix),
      5000,
      'the node on database 1',
    );
    // Within the grace a worker may still route through the old configuration: kept, superseded
    // (an old-config instance, a log phase begun before the move, runs there and is only used).
    const during = router(`${p}route`, db0, 1, [r1.url]);
    expect({
      ...(await state(old, db0, r1)),
      oldConfig: during.runtime === old,
      claims: old.claim.size,
    }).toEqual({
      current: true,
      polls: true,
      liveNode: true,
      oldConfig: true,
      claims: { live: 0, superseded: 1, released: 0 },
    });
    pastGrace();
    await waitFor(() => old.current() !== old, 5000, 'the old runtime retired').catch(() => {});
    await rounds(4);
    // Retired, it polls nothing and has left database 0; an old-config instance now runs on the
    // moved route's runtime, as one does after any record change.
    expect({
      old: await state(old, db0, r1),
      moved: await state(moved, db1, r2),
      oldConfigAfter: router(`${p}route`, db0, 1, [r1.url]).runtime === moved,
    }).toEqual({
      old: { current: false, polls: false, liveNode: false },
      moved: { current: true, polls: true, liveNode: true },
      oldConfigAfter: true,
    });
  }, 30_000);

  it('two routes on two records at once: both runtimes stay', async () => {
    const p = h.prefix();
    const [db0, db1] = [h.redis.config(p, { database: 0 }), h.redis.config(p, { database: 1 })];
    const [r1, r2] = [await replica(), await replica()];
    const a = router(`${p}A`, db0, 1, [r1.url]).runtime;
    const b = router(`${p}B`, db1, 2, [r2.url]).runtime;
    poller(`${p}poller`, db0, 3);
    pastGrace();
    await rounds(8);
    expect({ a: await state(a, db0, r1), b: await state(b, db1, r2) }).toEqual({
      a: { current: true, polls: true, liveNode: true },
      b: { current: true, polls: true, liveNode: true },
    });
  }, 30_000);

  it('a route moved while another stays on the old record: the old runtime stays for it', async () => {
    const p = h.prefix();
    const [db0, db1] = [h.redis.config(p, { database: 0 }), h.redis.config(p, { database: 1 })];
    const [r1, r2, r3] = [await replica(), await replica(), await replica()];
    const a = router(`${p}A`, db0, 1, [r1.url]).runtime;
    router(`${p}B`, db0, 2, [r3.url]);
    poller(`${p}poller`, db0, 3);
    const moved = router(`${p}A`, db1, 4, [r2.url]).runtime;
    pastGrace();
    await rounds(8);
    // Route B still routes to r3 on database 0; route A's old replica r1 is released there.
    expect({ a: await state(a, db0, r3), moved: moved.current() === moved, r1: a.routesTo(r1.url) }).toEqual({
      a: { current: true, polls: true, liveNode: true },
      moved: true,
      r1: false,
    });
  }, 30_000);

  it('a route changed back within the grace: the first record stays, the one it left retires', async () => {
    const p = h.prefix();
    const [db0, db1] = [h.redis.config(p, { database: 0 }), h.redis.config(p, { database: 1 })];
    const [r1, r2] = [await replica(), await replica()];
    const a = router(`${p}route`, db0, 1, [r1.url]).runtime;
    poller(`${p}poller`, db0, 2);
    const b = router(`${p}route`, db1, 3, [r2.url]).runtime;
    poller(`${p}poller`, db1, 4);
    await waitFor(async () => (await nodesIn(db1)).includes(b.leasePrefix), 5000, 'the node on database 1');
    // Changed back (a newer `__seq__`) before the grace ended.
    expect(router(`${p}route`, db0, 5, [r1.url]).runtime).toBe(a);
    expect(poller(`${p}poller`, db0, 6)).toBe(a);
    pastGrace();
    await waitFor(() => b.current() !== b, 5000, 'the runtime left retired').catch(() => {});
    await rounds(4);
    expect({ a: await state(a, db0, r1), b: await state(b, db1, r2) }).toEqual({
      a: { current: true, polls: true, liveNode: true },
      b: { current: false, polls: false, liveNode: false },
    });
  }, 30_000);
});
