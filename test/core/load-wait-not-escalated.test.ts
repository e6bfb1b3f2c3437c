/**
 * A request that waited for its adapter's own load under way on the chosen replica, until its
 * deadline, gets a 503 that `room_wait: escalate` does not turn into a wait for room anywhere:
 * escalated, it would load the adapter on a second replica beside the load (the invariant "each
 * cold adapter loaded once per burst"). Both ways a load can be under way: joined in this process
 * (dst seed 1001999), and another node's load lock in the shared store (dst seed 1000113, which
 * broke at 87be8cf through this second way). An unload under way is no load of the adapter: that
 * wait may escalate. The manager (src/adapters/manager.ts) and RoomWait (src/router/room-wait.ts)
 * together, on an in-memory store and a virtual clock.
 */
import { AdapterManager } from '../../src/adapters/manager';
import type { LoadOutcome, ReplicaApi, UnloadOutcome } from '../../src/backends/replica-api';
import { sleep, VirtualClock } from '../../src/clock';
import type { RouterConfig } from '../../src/config/router-schema';
import { RouterError } from '../../src/errors';
import { MemoryFleetStore } from '../../src/fleet/memory-store';
import { silentLogger } from '../../src/log';
import { RoomWait } from '../../src/router/room-wait';
import { adapterPolicy } from '../helpers/adapter-policy';

const U = 'http://r1:8000';
const T0 = 100_000;

/** A replica whose loads take `loadMs`. */
function replica(clock: VirtualClock, loadMs: number): ReplicaApi {
  return {
    scrape: () => Promise.reject(new Error('not used')),
    loadAdapter: async (): Promise<LoadOutcome> => {
      await sleep(clock, loadMs);
      return 'loaded';
    },
    unloadAdapter: async (): Promise<UnloadOutcome> => 'unloaded',
  };
}

async function setup(loadMs = 100) {
  const clock = new VirtualClock();
  await clock.run(T0);
  const store = new MemoryFleetStore();
  await store.upsertReplica({ url: U, backend: 'vllm', priority: 0 });
  const mgr = new AdapterManager(store, replica(clock, loadMs), clock, silentLogger);
  const ensure = (p = adapterPolicy()) => mgr.ensure(U, { name: 'a', path: '/adapters/a' }, p);
  /** Runs the clock until `p` settles; its error. */
  const failure = async (p: Promise<unknown>): Promise<RouterError> => {
    const settled = p.then(
      () => undefined,
      (e: unknown) => e,
    );
    await clock.run();
    const err = await settled;
    expect(err).toBeInstanceOf(RouterError);
    return err as RouterError;
  };
  /** Whether `room_wait: escalate` (before its own deadline) escalates `err`. */
  const escalates = (err: RouterError) =>
    new RoomWait(
      { room_wait: 'escalate', replica_wait_ms: 0, queue_timeout_ms: 30_000 } as RouterConfig,
      T0,
    ).escalate(err, T0 + 1);
  return { clock, store, ensure, failure, escalates };
}

describe("a wait for the adapter's own load under way is not escalated", () => {
  it("another node's load in the shared store, past the deadline: 503, not escalated (seed 1000113)", async () => {
    const { store, ensure, failure, escalates } = await setup();
    expect(await store.beginLoad(U, 'a', T0, 2)).not.toBeNull();
    const err = await failure(ensure());
    expect([err.status, err.code]).toEqual([503, 'adapter_slots_busy']);
    expect(escalates(err)).toBe(false);
  });

  it("a load this process has under way, joined past the joiner's deadline: 503, not escalated (seed 1001999)", async () => {
    const { clock, ensure, failure, escalates } = await setup(5000);
    const long = ensure(adapterPolicy({ queueTimeoutMs: 30_000, loadTimeoutMs: 30_000 }));
    await clock.run(T0 + 10);
    const err = await failure(ensure());
    expect([err.status, err.code]).toEqual([503, 'adapter_slots_busy']);
    expect(escalates(err)).toBe(false);
    await long;
  });

  it("another node's unload under way, past the deadline: a wait for room, which may escalate", async () => {
    const { store, ensure, failure, escalates } = await setup();
    const fence = await store.beginLoad(U, 'a', T0, 2);
    await store.finishLoad(U, 'a', fence!, true, T0);
    expect(await store.beginUnload(U, 'a', T0)).not.toBeNull();
    const err = await failure(ensure());
    expect([err.status, err.code]).toEqual([503, 'adapter_slots_busy']);
    expect(escalates(err)).toBe(true);
  });
});
