/**
 * Kept schedules (./holds.ts) of "a runtime every plugin left makes no call to its replicas past
 * the grace" (dst/left-check.ts): the registry (src/runtime-registry.ts) run by each simulated
 * plugin-server process, a node's lora-poller a plugin of its own.
 */
import { holds } from './holds';

describe('a runtime every plugin left', () => {
  // Seed 3402203 (--keep 1,5; found by the sweep of 3,400,000-3,409,999 on branch registry-dst, its
  // moves then drawn from stream +17, now +19: kept as written): the
  // lora-poller's record differs from the router's in timeout only and never follows it. The
  // record change to db 1 (same replicas) replaces the runtime of both records on db 0
  // (`claimReplicas`: one view of a replica per process); node 0's router then moves back to db 0
  // and replica 1. No plugin of the node is on db 1 any more, but the registry followed the
  // poller's record (db 0) through that replacement to the db 1 runtime and kept it for good:
  // polling replica 0, a node of db 1, past the grace.
  it('seed 3402203: a lora-poller whose record a change to other state took over does not keep that runtime once the router left it', async () => {
    await holds(
      3402203,
      {
        nodes: 3,
        replicas: 2,
        maxLoadedAdapters: 1,
        adapters: ['sql', 'chat', 'team,a', 'team'],
        loadMs: 1500,
        decodeMsPerStep: 100,
        coldLoadsPerMinute: 6,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 1000,
        spanMs: 2000,
        staticAdapters: ['sql,chat'],
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 500,
        configChanges: { retainEveryMs: 10000, staleMs: 2533, poller: { timeout: 1 }, move: { away: [1] } },
      },
      [
        { at: 106, kind: 'record-change', otherState: true, gapMs: 0 },
        { at: 792, kind: 'move', node: 0, replicas: [1] },
      ],
    );
  }, 60_000);
});
