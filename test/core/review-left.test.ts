/**
 * Review of the left record (merges 6fec46f1 and 2b535b53): an old configuration of a record that
 * was first replaced by another record on the SAME state (only `timeout` differs: the node and its
 * claims kept, runtime-registry.ts `replace`), then left by the plugin for other state and other
 * replicas. The old record has no runtime of its own: its configuration is still the old state's,
 * whose runtime is the replacing record's one while current, and nothing's once that one retired
 * as left. Sent to the plugin's newest runtime instead (other state), it listed and claimed the old
 * replicas there and pulled the old state's runtime over (`claimReplicas`), as review-move found
 * for a record that was itself left. Setup as test/core/review-move.test.ts.
 */
import type { RedisConfig } from '../../src/config/redis-schema';
import type { FleetRuntime } from '../../src/runtime';
import type { RouterService } from '../../src/router/router';
import { Plugin as Router } from '../../plugins/lora-router';
import { waitFor } from '../../harness/wait';
import type { CountingReplica } from '../helpers/counting-replica';
import { useRecordMove } from '../helpers/record-move';

const { h, replica, router, poller, nodesIn, rounds, state, pastGrace } = useRecordMove('rl');

/** What the moved route's runtime does with the old replica R1 now. */
async function onMoved(moved: FleetRuntime, db1: RedisConfig, r1: CountingReplica) {
  await rounds(8);
  return {
    claimsR1: moved.routesTo(r1.url),
    listedR1: (await moved.store.replicaSpecs()).some((s) => s.url === r1.url),
    movedCurrent: moved.current() === moved,
  };
}

describe('an old configuration of a record replaced on the same state, its plugin then moved to other state', () => {
  it('within the grace: it runs on the old state runtime, which stays current (the lora-poller still there)', async () => {
    const p = h.prefix();
    const a = h.redis.config(p, { database: 0, timeout: 2000 });
    const a2 = h.redis.config(p, { database: 0, timeout: 3000 });
    const db1 = h.redis.config(p, { database: 1 });
    const [r1, r2] = [await replica(), await replica()];
    router(`${p}route`, a, 1, [r1.url]);
    // The route's lora-poller on the same database, its timeout another: it replaces the runtime, same state.
    const db0 = poller(`${p}poller`, a2, 2);
    await waitFor(async () => (await nodesIn(a2)).includes(db0.leasePrefix), 5000, 'the node on database 0');
    // The route moves to database 1 and other replicas; its lora-poller stays.
    const moved = router(`${p}route`, db1, 3, [r2.url]).runtime;
    await waitFor(
      async () => (await nodesIn(db1)).includes(moved.leasePrefix),
      5000,
      'the node on database 1',
    );
    // A log phase of a request begun before both changes: Kong starts an instance of the first configuration.
    const late = router(`${p}route`, a, 1, [r1.url]);
    await (late as unknown as { ready: Promise<void> }).ready;
    expect({
      runsOnDb0: late.runtime === db0,
      db0Current: db0.current() === db0,
      ...(await onMoved(moved, db1, r1)),
    }).toEqual({ runsOnDb0: true, db0Current: true, claimsR1: false, listedR1: false, movedCurrent: true });
  }, 30_000);

  it('after the replacing runtime retired as left: it takes nothing of R1 onto database 1', async () => {
    const p = h.prefix();
    const a = h.redis.config(p, { database: 0, timeout: 2000 });
    const a2 = h.redis.config(p, { database: 0, timeout: 3000 });
    const db1 = h.redis.config(p, { database: 1 });
    const [r1, r2] = [await replica(), await replica()];
    const first = router(`${p}route`, a, 1, [r1.url]).runtime;
    // The route's own timeout changed: same state, the runtime replaced at once.
    const db0 = router(`${p}route`, a2, 2, [r1.url]).runtime;
    await waitFor(async () => (await nodesIn(a2)).includes(db0.leasePrefix), 5000, 'the node on database 0');
    const moved = router(`${p}route`, db1, 3, [r2.url]).runtime;
    await waitFor(
      async () => (await nodesIn(db1)).includes(moved.leasePrefix),
      5000,
      'the node on database 1',
    );
    pastGrace();
    await waitFor(() => first.current() === moved && db0.current() === moved, 5000, 'database 0 retired');
    await waitFor(async () => !(await nodesIn(a2)).includes(db0.leasePrefix), 5000, 'database 0 left');
    // A log phase of a request begun before both changes.
    const late = router(`${p}route`, a, 1, [r1.url]);
    await (late as unknown as { ready: Promise<void> }).ready;
    expect(await onMoved(moved, db1, r1)).toEqual({ claimsR1: false, listedR1: false, movedCurrent: true });
  }, 30_000);

  it('a lora-poller left on the replaced record keeps the old state runtime past the grace', async () => {
    const p = h.prefix();
    const a = h.redis.config(p, { database: 0, timeout: 2000 });
    const a2 = h.redis.config(p, { database: 0, timeout: 3000 });
    const db1 = h.redis.config(p, { database: 1 });
    const [r1, r2] = [await replica(), await replica()];
    poller(`${p}poller`, a, 1);
    // The route's timeout another than its lora-poller's: it replaces the runtime, same state.
    const db0 = router(`${p}route`, a2, 2, [r1.url]).runtime;
    await waitFor(async () => (await nodesIn(a2)).includes(db0.leasePrefix), 5000, 'the node on database 0');
    // The route moves to database 1 and other replicas; its lora-poller stays on database 0.
    const moved = router(`${p}route`, db1, 3, [r2.url]).runtime;
    await waitFor(
      async () => (await nodesIn(db1)).includes(moved.leasePrefix),
      5000,
      'the node on database 1',
    );
    pastGrace();
    await rounds(8);
    expect({ db0: await state(db0, a2, r1), movedCurrent: moved.current() === moved }).toEqual({
      db0: { current: true, polls: true, liveNode: true },
      movedCurrent: true,
    });
  }, 30_000);
});

describe('a request through an old configuration of a left record', () => {
  it('is refused in the OpenAI format, with nothing taken on the runtime it decided on', async () => {
    const p = h.prefix();
    const [db0, db1] = [h.redis.config(p, { database: 0 }), h.redis.config(p, { database: 1 })];
    const [r1, r2] = [await replica(), await replica()];
    const old = router(`${p}route`, db0, 1, [r1.url]).runtime;
    const moved = router(`${p}route`, db1, 2, [r2.url]).runtime;
    await waitFor(
      async () => (await nodesIn(db1)).includes(moved.leasePrefix),
      5000,
      'the node on database 1',
    );
    pastGrace();
    await waitFor(() => old.current() === moved, 5000, 'the old runtime retired');
    // An instance Kong starts for the old configuration (a worker still on the old iterator).
    const config = {
      replicas: [{ url: r1.url }],
      redis: db0,
      base_model: 'base',
      __plugin_id: `${p}route`,
      __seq__: 1,
    };
    const late = (new Router(config) as unknown as { service: RouterService }).service;
    const body = Buffer.from(JSON.stringify({ model: 'base', prompt: 'hi', max_tokens: 1 }));
    const r = await late.route({ path: '/v1/completions', body });
    const error =
      r.kind === 'respond' ? (r.body as { error?: { message?: unknown; code?: unknown } }).error : undefined;
    expect({
      refused: r.kind === 'respond' && r.status >= 500,
      status: r.kind === 'respond' ? r.status : r.kind,
      code: error?.code,
      openAi: typeof error?.message === 'string',
      claimsR1: moved.routesTo(r1.url),
      hits: r1.hits,
    }).toEqual({
      refused: true,
      status: 503,
      code: 'no_replica',
      openAi: true,
      claimsR1: false,
      hits: r1.hits,
    });
  }, 30_000);
});

describe('another plugin newly configured on a left record', () => {
  it('registers live there: a runtime of the record again, a live node, its replica claimed', async () => {
    const p = h.prefix();
    const [db0, db1] = [h.redis.config(p, { database: 0 }), h.redis.config(p, { database: 1 })];
    const [r1, r2, r3] = [await replica(), await replica(), await replica()];
    const old = router(`${p}route`, db0, 1, [r1.url]).runtime;
    const moved = router(`${p}route`, db1, 2, [r2.url]).runtime;
    await waitFor(
      async () => (await nodesIn(db1)).includes(moved.leasePrefix),
      5000,
      'the node on database 1',
    );
    pastGrace();
    await waitFor(() => old.current() === moved, 5000, 'the old runtime retired');
    // A route never on database 0 before: its first configuration there.
    const fresh = router(`${p}other`, db0, 3, [r3.url]);
    await (fresh as unknown as { ready: Promise<void> }).ready;
    expect({
      ownRuntime: fresh.runtime !== moved && fresh.runtime.current() === fresh.runtime,
      claims: fresh.runtime.claim.size,
      claimsR3: fresh.runtime.routesTo(r3.url),
      liveNode: (await nodesIn(db0)).includes(fresh.runtime.leasePrefix),
    }).toEqual({
      ownRuntime: true,
      claims: { live: 1, superseded: 0, released: 0 },
      claimsR3: true,
      liveNode: true,
    });
  }, 30_000);
});
