/**
 * Review of the record move (merge 6fec46f1): what reaches the old record's configuration AFTER its
 * runtime retired. A route's lora-router and lora-poller move from database 0 and replicas R1 to
 * database 1 and replicas R2 (disjoint); past the lapse grace the old runtime retires, its heir the
 * moved route's runtime. A configuration of the old record may still come: an instance Kong kept
 * (a worker's request through it) or one Kong starts for a log phase (plugin.lua 3.9.3
 * `get_instance_id`). It decides on the heir: the heir must not take R1 over on database 1 (a
 * replica of other state, where it sees none of that state's leases), nor list it there.
 * Setup as test/core/record-move.test.ts (`performance.now` moved past the grace).
 */
import type { RedisConfig } from '../../src/config/redis-schema';
import type { FleetRuntime } from '../../src/runtime';
import { waitFor } from '../../harness/wait';
import type { CountingReplica } from '../helpers/counting-replica';
import { useRecordMove } from '../helpers/record-move';

const { h, replica, router, poller, nodesIn, rounds, state, pastGrace } = useRecordMove('rv');

/** A route and its lora-poller moved from database 0 (R1) to database 1 (R2), the old runtime retired. */
async function movedAndRetired() {
  const p = h.prefix();
  const [db0, db1] = [h.redis.config(p, { database: 0 }), h.redis.config(p, { database: 1 })];
  const [r1, r2] = [await replica(), await replica()];
  const kept = router(`${p}route`, db0, 1, [r1.url]);
  const old = kept.runtime;
  poller(`${p}poller`, db0, 2);
  await waitFor(async () => (await nodesIn(db0)).includes(old.leasePrefix), 5000, 'the node on database 0');
  const moved = router(`${p}route`, db1, 3, [r2.url]).runtime;
  poller(`${p}poller`, db1, 4);
  await waitFor(async () => (await nodesIn(db1)).includes(moved.leasePrefix), 5000, 'the node on database 1');
  pastGrace();
  await waitFor(() => old.current() === moved, 5000, 'the old runtime retired');
  await waitFor(async () => !(await nodesIn(db0)).includes(old.leasePrefix), 5000, 'database 0 left');
  return { p, db0, db1, r1, r2, kept, old, moved };
}

/** What the moved route's runtime does with the old replica R1 now. */
async function onHeir(moved: FleetRuntime, db1: RedisConfig, r1: CountingReplica) {
  const before = r1.hits;
  await rounds(8);
  return {
    claimsR1: moved.routesTo(r1.url),
    polledR1: r1.hits > before,
    listedR1: (await moved.store.replicaSpecs()).some((s) => s.url === r1.url),
    stillCurrent: moved.current() === moved,
  };
}

describe('the old record after its runtime retired (review of the record move)', () => {
  it('an old-config instance Kong starts then (a log phase) takes nothing of R1 onto database 1', async () => {
    const { p, db0, db1, r1, moved } = await movedAndRetired();
    const late = router(`${p}route`, db0, 1, [r1.url]);
    await (late as unknown as { ready: Promise<void> }).ready;
    expect({ runsOn: late.runtime === moved, ...(await onHeir(moved, db1, r1)) }).toEqual({
      runsOn: true,
      claimsR1: false,
      polledR1: false,
      listedR1: false,
      stillCurrent: true,
    });
  }, 30_000);

  it('a request through an instance kept from before the move takes nothing of R1 onto database 1', async () => {
    const { db1, r1, kept, moved } = await movedAndRetired();
    const body = Buffer.from(JSON.stringify({ model: 'base', prompt: 'hi', max_tokens: 1 }));
    const r = await kept.route({ path: '/v1/completions', body });
    if (r.kind === 'proxy') await kept.finish(r.leaseId, 200);
    expect({ proxiedToR1: r.kind === 'proxy', ...(await onHeir(moved, db1, r1)) }).toEqual({
      proxiedToR1: false,
      claimsR1: false,
      polledR1: false,
      listedR1: false,
      stillCurrent: true,
    });
  }, 30_000);
});

describe('the old record run again after its runtime retired (review of the record move)', () => {
  it('an old-config instance on a fresh runtime of the record (its lora-poller moved back) is only kept for the grace', async () => {
    const { p, db0, r1, moved } = await movedAndRetired();
    // The lora-poller alone moves back to database 0: a runtime runs there again.
    const again = poller(`${p}poller`, db0, 5);
    expect(again).not.toBe(moved);
    // A log phase of a request begun before the move: Kong starts an instance of the old configuration.
    const late = router(`${p}route`, db0, 1, [r1.url]);
    await (late as unknown as { ready: Promise<void> }).ready;
    const kept = { on: late.runtime === again, claims: again.claim.size };
    pastGrace();
    await rounds(8);
    expect({ kept, after: again.claim.size, claimsR1: again.routesTo(r1.url) }).toEqual({
      kept: { on: true, claims: { live: 0, superseded: 1, released: 0 } },
      after: { live: 0, superseded: 0, released: 1 },
      claimsR1: false,
    });
  }, 30_000);
});

describe('around the retirement (review of the record move: held, not failed first)', () => {
  it('changed back while the old runtime still drains: the fresh runtime is another node, kept when the old one leaves', async () => {
    const p = h.prefix();
    const [db0, db1] = [h.redis.config(p, { database: 0 }), h.redis.config(p, { database: 1 })];
    const [r1, r2] = [await replica(), await replica()];
    const old = router(`${p}route`, db0, 1, [r1.url]).runtime;
    poller(`${p}poller`, db0, 2);
    await waitFor(async () => (await nodesIn(db0)).includes(old.leasePrefix), 5000, 'the node on database 0');
    router(`${p}route`, db1, 3, [r2.url]);
    poller(`${p}poller`, db1, 4);
    // A decision under way on the old runtime when it retires: its drain waits for it.
    old.decisionBegan();
    pastGrace();
    await waitFor(() => old.current() !== old, 5000, 'the old runtime retiring');
    // Changed back to database 0 meanwhile: a runtime of its own there, another node id.
    const back = router(`${p}route`, db0, 5, [r1.url]).runtime;
    poller(`${p}poller`, db0, 6);
    await waitFor(async () => (await nodesIn(db0)).includes(back.leasePrefix), 5000, 'the fresh node');
    const during = {
      sameNode: back.leasePrefix === old.leasePrefix,
      oldStillNode: (await nodesIn(db0)).includes(old.leasePrefix),
    };
    // The decision ends: the old runtime leaves database 0 (its node, its claims, its connection).
    old.decisionEnded();
    await waitFor(async () => !(await nodesIn(db0)).includes(old.leasePrefix), 5000, 'the old node left');
    await rounds(4);
    expect({
      during,
      back: await state(back, db0, r1),
      claimsR1: back.routesTo(r1.url),
      listedR1: (await back.store.replicaSpecs()).some((s) => s.url === r1.url),
    }).toEqual({
      during: { sameNode: false, oldStillNode: true },
      back: { current: true, polls: true, liveNode: true },
      claimsR1: true,
      listedR1: true,
    });
  }, 30_000);

  it('lora-poller moved, lora-router left: both runtimes stay, the router one polls its replicas', async () => {
    const p = h.prefix();
    const [db0, db1] = [h.redis.config(p, { database: 0 }), h.redis.config(p, { database: 1 })];
    const r1 = await replica();
    const a = router(`${p}route`, db0, 1, [r1.url]).runtime;
    poller(`${p}poller`, db0, 2);
    await waitFor(async () => (await nodesIn(db0)).includes(a.leasePrefix), 5000, 'the node on database 0');
    const b = poller(`${p}poller`, db1, 3);
    pastGrace();
    await rounds(8);
    expect({ a: await state(a, db0, r1), bCurrent: b.current() === b, claims: a.claim.size }).toEqual({
      a: { current: true, polls: true, liveNode: true },
      bCurrent: true,
      claims: { live: 1, superseded: 0, released: 0 },
    });
  }, 30_000);

  it('moved to replicas overlapping the old ones: the old runtime is replaced at once (with the hold-off), not left', async () => {
    const p = h.prefix();
    const [db0, db1] = [h.redis.config(p, { database: 0 }), h.redis.config(p, { database: 1 })];
    const [x, y, z] = [await replica(), await replica(), await replica()];
    const old = router(`${p}route`, db0, 1, [x.url, y.url]).runtime;
    poller(`${p}poller`, db0, 2);
    await waitFor(async () => (await nodesIn(db0)).includes(old.leasePrefix), 5000, 'the node on database 0');
    const moved = router(`${p}route`, db1, 3, [y.url, z.url]).runtime;
    // Replaced as any change to other state sharing a replica: the old configuration goes along,
    // kept for the grace on the new runtime (x still claimed there meanwhile).
    const atMove = { replaced: old.current() === moved, claimsX: moved.routesTo(x.url) };
    pastGrace();
    // The lapse comes with the new runtime's poll round (its first one: a router's default interval).
    await waitFor(() => !moved.routesTo(x.url), 10_000, 'x released').catch(() => {});
    expect({ atMove, claimsXAfter: moved.routesTo(x.url), movedCurrent: moved.current() === moved }).toEqual({
      atMove: { replaced: true, claimsX: true },
      claimsXAfter: false,
      movedCurrent: true,
    });
  }, 30_000);
});
