/**
 * A node (FleetRuntime) on a `redis` record of a real redis-server, its poller stopped (its rounds
 * are run by hand, or not at all: no poll renews or reads anything), sharing the state, with one
 * replica registered: the per-node lease count suites (reclaimed-own-lease, own-count-mixed).
 */
import type { RedisConfig } from '../../src/config/redis-schema';
import type { ReplicaSpec } from '../../src/fleet/types';
import { silentLogger } from '../../src/log';
import { FleetRuntime } from '../../src/runtime';
import { waitFor } from '../../harness/wait';

export async function sharedNode(config: RedisConfig, spec: ReplicaSpec): Promise<FleetRuntime> {
  const rt = new FleetRuntime({ log: silentLogger, seed: 1, redis: config, poller: { intervalMs: 600_000 } });
  rt.poller.stop();
  await waitFor(() => rt.store.mode?.() === 'redis', 5000, 'sharing state');
  await rt.store.upsertReplica(spec);
  return rt;
}
