/**
 * Review 67: an old-config instance is one of its own plugin (Kong's `__plugin_id`), through the
 * plugin's entry over a real redis-server. Kong gives every plugin a new `__seq__` at each rebuild
 * of its plugins iterator, in the iterator's order (plugins_iterator.lua 3.9.1 `get_plugin_config`:
 * the config tables are read afresh, so `__key__` is unset and the node-wide counter is bumped for
 * each), and each worker rebuilds on its own: a newer configuration of one plugin may come with a
 * lower `__seq__` than another plugin's configuration of the same rebuild.
 */
import type { RedisConfig } from '../../src/config/redis-schema';
import { stateKeyOf } from '../../src/config/redis-schema';
import type { RouterService } from '../../src/router/router';
import { Plugin } from '../../plugins/lora-router';
import { redisRuntimes } from '../helpers/runtime-harness';

const h = redisRuntimes('r67');
/**
 * Loopback ports nothing listens on: preflight and polls are refused at once. One test's own: the
 * process's runtimes outlive a test, and one routing to a replica steps down for a newer one.
 */
const UA = 'http://127.0.0.1:9';
const UB = 'http://127.0.0.1:7';
const UC = 'http://127.0.0.1:11';
const readies: Promise<void>[] = [];
afterEach(async () => {
  await Promise.allSettled(readies.splice(0));
});

/** Kong constructing a lora-router instance of plugin `pluginId` (one per test: the process keeps them). */
function instance(
  pluginId: string,
  redis: RedisConfig,
  seq: number,
  urls: string[],
  more: Record<string, unknown> = {},
): RouterService {
  const config = {
    replicas: urls.map((url) => ({ url })),
    redis,
    ...more,
    __plugin_id: pluginId,
    __seq__: seq,
  };
  const service = (new Plugin(config) as unknown as { service: RouterService | null }).service;
  if (!service) throw new Error('the configuration was refused');
  h.track(service.runtime);
  readies.push((service as unknown as { ready: Promise<void> }).ready);
  return service;
}

describe('an old-config instance is told by its own plugin’s newer configuration only', () => {
  it("a route left on its record is not moved to the record another route's newer configuration chose", async () => {
    const p = h.prefix();
    const db0 = h.redis.config(p, { database: 0 });
    const db1 = h.redis.config(p, { database: 1 });
    const named = (rt: { stateKey: string }) =>
      ({ [stateKeyOf(db0)]: 'db0', [stateKeyOf(db1)]: 'db1' })[rt.stateKey] ?? 'another';
    // Two routes on one Redis database.
    instance(`${p}A`, db0, 1, [UA]);
    instance(`${p}B`, db0, 2, [UB]);
    // The operator moves route A to database 1. The rebuild gives B's unchanged configuration
    // `__seq__` 3 and A's new one 4 (the iterator's order); A's request comes first.
    instance(`${p}A`, db1, 4, [UA]);
    const b = instance(`${p}B`, db0, 3, [UB]);
    // B's configuration is its plugin's newest: it decides on its own record's state, which its
    // peers share, not on the database A moved to.
    expect({ b: named(b.runtime) }).toEqual({ b: 'db0' });
  }, 30_000);

  it('an old-config instance whose record another route still uses runs there and moves that route nowhere', async () => {
    const p = h.prefix();
    const db0 = h.redis.config(p, { database: 0 });
    const db1 = h.redis.config(p, { database: 1 });
    const [u1, u2, u3] = ['http://127.0.0.1:17', 'http://127.0.0.1:19', 'http://127.0.0.1:21'];
    instance(`${p}A`, db0, 1, [u1]);
    instance(`${p}B`, db0, 2, [u2]);
    // Route A moves to database 1 and to other replicas; route B stays.
    const a = instance(`${p}A`, db1, 4, [u3]);
    const b = instance(`${p}B`, db0, 3, [u2]);
    // A request on A begun before the change logs: Kong starts an instance of A's old configuration.
    instance(`${p}A`, db0, 1, [u1]);
    const named = (rt: { stateKey: string }) =>
      ({ [stateKeyOf(db0)]: 'db0', [stateKeyOf(db1)]: 'db1' })[rt.stateKey] ?? 'another';
    expect({ a: named(a.runtime.current()), b: named(b.runtime.current()) }).toEqual({ a: 'db1', b: 'db0' });
  }, 30_000);

  it('a configuration a worker started after a newer one of its plugin (two changes in a row) runs on the newer one’s runtime', async () => {
    const p = h.prefix();
    const db = (database: number) => h.redis.config(p, { database });
    const named = (rt: { stateKey: string }) =>
      ({ [stateKeyOf(db(1))]: 'db1', [stateKeyOf(db(2))]: 'db2' })[rt.stateKey] ?? 'another';
    instance(`${p}A`, db(0), 1, [UC]);
    // Two changes in a row: worker 1 rebuilt after the first (database 1, `__seq__` 2), worker 2
    // only after the second (database 2, `__seq__` 3) and started its instance first. Worker 1's
    // first request after its rebuild starts the instance of the first change's configuration.
    const second = instance(`${p}A`, db(2), 3, [UC]);
    const first = instance(`${p}A`, db(1), 2, [UC]);
    expect({ first: named(first.runtime.current()), second: named(second.runtime.current()) }).toEqual({
      first: 'db2',
      second: 'db2',
    });
  }, 30_000);
});

describe("a `redis` record change with other settings: the replicas follow the new configuration's", () => {
  // The successor registers the plugin's new configuration, then adopts the old runtime's, kept
  // superseded for the grace (NodeClaim.adopt): its registration order counts on the old
  // runtime, not this one's, and a superseded configuration is never the one that sets a replica.
  it.each([
    ['same state (timeout changed too)', { timeout: 2000 }, { timeout: 3000 }, 'http://127.0.0.1:13'],
    ['other state (another database)', { database: 0 }, { database: 1 }, 'http://127.0.0.1:15'],
  ])(
    '%s',
    async (_name, before, after, u) => {
      const p = h.prefix();
      instance(`${p}A`, h.redis.config(p, before), 1, [u], { max_loaded_adapters: 4 });
      const next = instance(`${p}A`, h.redis.config(p, after), 2, [u], { max_loaded_adapters: 2 });
      const rt = next.runtime.current();
      // What the trim after a poll and prefetching hold the replica to (runtime.ts).
      expect({
        maxLoaded: rt.claim.replicas.get(u)?.limit.maxLoadedAdapters,
        claims: rt.claim.size,
      }).toEqual({
        maxLoaded: 2,
        claims: { live: 1, superseded: 1, released: 0 },
      });
    },
    30_000,
  );
});
