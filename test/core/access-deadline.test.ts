/**
 * The access phase's worst path against Kong's plugin-server timeout (60 s: Kong proxies the
 * request unrouted past it): every scrape, unload, load, after-load check and retry of one
 * request ends by one deadline, on a virtual clock where each replica call takes all the time it
 * is given.
 */
import { AdapterManager, type AdapterPolicy } from '../../src/adapters/manager';
import type { ReplicaApi } from '../../src/backends/replica-api';
import { VirtualClock } from '../../src/clock';
import { ACCESS_WAIT_BUDGET_MS, KONG_RPC_TIMEOUT_MS } from '../../src/config/parse';
import { MemoryFleetStore } from '../../src/fleet/memory-store';
import { silentLogger } from '../../src/log';

const U = 'http://10.0.0.1:8000';
const RESIDENTS = 10;
const names = Array.from({ length: RESIDENTS }, (_, i) => `r${i}`);

/** A replica whose adapters are all idle by its word, and whose every unload hangs until its timeout. */
function stuckReplica(clock: VirtualClock): ReplicaApi {
  const after = <T>(ms: number, fn: () => T) =>
    new Promise<T>((resolve, reject) =>
      clock.after(ms, () => {
        try {
          resolve(fn());
        } catch (err) {
          reject(err as Error);
        }
      }),
    );
  return {
    scrape: () => Promise.reject(new Error('not polled here')),
    loadAdapter: (_u, _n, _p, timeoutMs) => after(timeoutMs, () => 'loaded' as const),
    unloadAdapter: (_u, _n, timeoutMs) =>
      after(timeoutMs, () => {
        throw new Error(`no answer within ${timeoutMs} ms`);
      }),
    activity: async () => ({ busy: [] }),
    residency: (_u, timeoutMs) =>
      after(timeoutMs - 1, () => names.map((name) => ({ name, path: `/adapters/${name}` }))),
  };
}

it('a cold load on a full replica whose unloads all hang ends within the access deadline', async () => {
  const clock = new VirtualClock();
  const store = new MemoryFleetStore();
  await store.upsertReplica({ url: U, backend: 'vllm', priority: 0 });
  await store.applySnapshot(U, {
    at: 0,
    ok: true,
    registry: names.map((name) => ({ name, path: `/adapters/${name}` })),
    managed: () => true,
  });
  const manager = new AdapterManager(store, stuckReplica(clock), clock, silentLogger);
  // The widest the schema allows: refresh 1 s + queue 29 s + 2 x load 12.5 s = 55 s.
  const policy = {
    maxLoadedAdapters: RESIDENTS,
    loadTimeoutMs: 12_500,
    queueTimeoutMs: 29_000,
    backoffBaseMs: 1000,
    backoffMaxMs: 60_000,
    isStatic: () => false,
    deadline: clock.now() + ACCESS_WAIT_BUDGET_MS,
  };
  let ended: number | undefined;
  const outcome = manager
    .ensure(U, { name: 'cold', path: '/adapters/cold' }, policy satisfies AdapterPolicy)
    .then(
      () => 'loaded',
      (err: Error) => err.message,
    )
    .finally(() => (ended = clock.now()));
  for (let i = 0; i < 600 && ended === undefined; i++) await clock.run(clock.now() + 1000);
  expect({ outcome: await outcome, ended }).toMatchObject({
    outcome: expect.stringMatching(/slot|busy|room/i),
  });
  expect(ended).toBeLessThanOrEqual(ACCESS_WAIT_BUDGET_MS);
  expect(ended).toBeLessThan(KONG_RPC_TIMEOUT_MS);
});
