/**
 * A runtime replaced by a `redis` record change must stay quiet: the 30-minute fault run (issue
 * 24) ended with every node's status route silent after ~100 record changes, and its nodes kept
 * polling with runtimes that had been replaced (each logged "replica ... stopped answering polls"
 * on its own, and "shared fleet state still unavailable" from a store already closed), over a
 * real redis-server.
 */
import { parseRouterConfig } from '../../src/config/parse';
import { FailoverFleetStore } from '../../src/fleet/redis/failover-store';
import { RedisFleetStore } from '../../src/fleet/redis/redis-store';
import type { RedisConfig } from '../../src/config/redis-schema';
import { RouterService } from '../../src/router/router';
import type { FleetRuntime } from '../../src/runtime';
import { sharedRuntime } from '../../src/runtime-registry';
import { redisRuntimes, SPEC, U } from '../helpers/runtime-harness';

const h = redisRuntimes('rr');

/** What Kong does on a configuration push to one node: a lora-router instance on the new record. */
function configure(redis: RedisConfig): { rt: FleetRuntime; router: RouterService } {
  const rt = h.track(sharedRuntime(redis));
  const router = new RouterService(parseRouterConfig({ replicas: [{ url: U }], redis }), rt);
  return { rt, router };
}

describe('a runtime replaced by a `redis` record change', () => {
  it('stops polling for good, even when it is replaced before its router registered the replicas', async () => {
    const p = h.prefix();
    const records: RedisConfig[] = [];
    // The chaos run's changes: other database and other timeouts in turn, a second or less apart.
    for (let i = 0; i < 8; i++)
      records.push(h.redis.config(p, { database: Math.floor(i / 2) % 2, timeout: 500 + 100 * (i % 2) }));
    const seen: FleetRuntime[] = [];
    const readies: Promise<void>[] = [];
    for (const r of records) {
      const { rt, router } = configure(r);
      seen.push(rt);
      readies.push((router as unknown as { ready: Promise<void> }).ready);
    }
    // Every router has registered its replicas (the step that starts polling).
    await Promise.all(readies);
    const current = seen[seen.length - 1]!;
    expect(current.current()).toBe(current);
    // Which of the runtimes poll, by the order they were configured: only the last.
    const polling = seen.flatMap((rt, i) => (rt.poller.running ? [i] : []));
    expect(polling).toEqual([seen.length - 1]);
  }, 30_000);

  it('its closed store, called once more (a decision that ended late), does not probe Redis for ever', async () => {
    // The fault run's nodes logged "shared fleet state still unavailable after 342 s" with Redis
    // up: a retired runtime's store, closed, then degraded by a late call and probing on.
    const warnings: string[] = [];
    const log = { info: () => {}, warn: (m: string) => warnings.push(m), error: () => {} };
    const shared = new RedisFleetStore(h.redis.config(h.prefix()), 'closed-node', log);
    const s = new FailoverFleetStore(shared, log, { probeMs: 20, logEveryMs: 20 });
    await s.upsertReplica(SPEC);
    await s.close();
    // A decision under way when the runtime retired ends now: its store answers from local state.
    await s.views([U]);
    await new Promise((r) => setTimeout(r, 400));
    expect(warnings.filter((w) => w.includes('still unavailable'))).toEqual([]);
  }, 30_000);
});
