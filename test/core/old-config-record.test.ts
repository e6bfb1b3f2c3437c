/**
 * An old-config instance after a `redis` record change, through the plugin's entry (what the
 * plugin server constructs) over a real redis-server. Kong starts an instance of the OLD
 * configuration for the log phase of a request begun before the reload (plugin.lua 3.9.3
 * `get_instance_id`; harness/kong/workers.ts `instanceId`), with the old `__seq__`. Its record
 * is no longer the node's: it must not take the node back to a runtime on it.
 */
import type { RedisConfig } from '../../src/config/redis-schema';
import { NodeClaim } from '../../src/fleet/node-claim';
import type { RouterService } from '../../src/router/router';
import type { FleetRuntime } from '../../src/runtime';
import { Plugin } from '../../plugins/lora-router';
import { redisRuntimes } from '../helpers/runtime-harness';

const h = redisRuntimes('oc');
/** Loopback ports nothing listens on: preflight and polls are refused at once. */
const U = 'http://127.0.0.1:9';
const OTHER = 'http://127.0.0.1:7';
/** Each instance's registration, awaited after the test (its replicas in the store). */
const readies: Promise<void>[] = [];
afterEach(async () => {
  await Promise.allSettled(readies.splice(0));
});

/**
 * Kong constructing a lora-router instance of the test's plugin (`__seq__`: node-wide, growing),
 * its id one per test (by the record's prefix): the process keeps each plugin's newest.
 */
function instance(redis: RedisConfig, seq: number, urls: string[] = [U]): RouterService {
  const config = {
    replicas: urls.map((url) => ({ url })),
    redis,
    __plugin_id: `p1-${redis.prefix}`,
    __seq__: seq,
  };
  const service = (new Plugin(config) as unknown as { service: RouterService | null }).service;
  if (!service) throw new Error('the configuration was refused');
  h.track(service.runtime);
  readies.push((service as unknown as { ready: Promise<void> }).ready);
  return service;
}

/** Which runtimes the node decides on now, named by the configuration that created them. */
const current = (named: Record<string, FleetRuntime>) => {
  const names = new Map(Object.entries(named).map(([k, rt]) => [rt, k]));
  return Object.fromEntries(
    Object.entries(named).map(([k, rt]) => [k, names.get(rt.current()) ?? 'another']),
  );
};

describe("an old-config instance after a `redis` record change keeps the node on the new record's runtime", () => {
  it('same state (only timeout_ms changed): the old configuration gets the current runtime, none is replaced', async () => {
    const p = h.prefix();
    const before = instance(h.redis.config(p, { timeout: 2000 }), 1);
    const after = instance(h.redis.config(p, { timeout: 3000 }), 2);
    // A request begun before the reload logs now: Kong starts an instance of the old configuration.
    const old = instance(h.redis.config(p, { timeout: 2000 }), 1);
    expect({
      ...current({ before: before.runtime, after: after.runtime }),
      oldInstance: old.runtime.current() === after.runtime ? 'after' : 'another',
    }).toEqual({ before: 'after', after: 'after', oldInstance: 'after' });
  }, 30_000);

  it('other state (another database): the old configuration replaces nothing', async () => {
    const p = h.prefix();
    const before = instance(h.redis.config(p, { database: 0 }), 1);
    const after = instance(h.redis.config(p, { database: 1 }), 2);
    const old = instance(h.redis.config(p, { database: 0 }), 1);
    expect({
      ...current({ before: before.runtime, after: after.runtime }),
      oldInstance: old.runtime.current() === after.runtime ? 'after' : 'another',
    }).toEqual({ before: 'after', after: 'after', oldInstance: 'after' });
  }, 30_000);

  it('a record changed back (a newer `__seq__`) still replaces the runtime', async () => {
    const p = h.prefix();
    const first = instance(h.redis.config(p, { timeout: 2000 }), 1);
    const second = instance(h.redis.config(p, { timeout: 3000 }), 2);
    const back = instance(h.redis.config(p, { timeout: 2000 }), 3);
    expect(back.runtime).not.toBe(second.runtime);
    expect(current({ first: first.runtime, second: second.runtime, back: back.runtime })).toEqual({
      first: 'back',
      second: 'back',
      back: 'back',
    });
  }, 30_000);
});

describe('NodeClaim.adopt on a change to other state', () => {
  const settings = {} as never;
  it("keeps the predecessor's live configuration of a key the successor registered as superseded, for the grace", () => {
    const old = new NodeClaim();
    old.register('p1', 'old', [U], settings, 0, 1);
    const next = new NodeClaim();
    // The successor registered the plugin's new configuration (other replicas) before it adopts.
    next.register('p1', 'new', [OTHER], settings, 10, 2);
    // `nowMono` of the change: the grace runs from it.
    next.adopt(old, 20);
    // Another worker may still route through the old configuration: its replica stays claimed.
    expect({ claimsOld: next.claims(U), size: next.size }).toEqual({
      claimsOld: true,
      size: { live: 1, superseded: 1, released: 0 },
    });
    // Unused for the grace, it lapses: its replica is released.
    expect(next.lapse(20 + 60_000, 60_000)).toEqual([U]);
  });
});
