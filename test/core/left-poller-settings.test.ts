/**
 * A lora-poller whose record a change of its route to other state took over (the same replicas:
 * `claimReplicas` replaced the runtime of both records, the poller's settings passed along), the
 * route then moved back to the poller's state and other replicas: the other state's runtime retires
 * as left (runtime-registry.ts `retireIfLeft`, seed 3402203) and the poller's record now leads to the
 * route's new runtime (its `/status` and `/metrics` are read there). That runtime polls at least as
 * often as the poller asked (FleetRuntime.registerPolling: every configuration gets figures at least
 * as fresh as it asked for). Before, `retireUnclaimed` dropped the settings the left runtime held for
 * a plugin still on it: the heir polled at the default interval. Setup as test/core/left-other-state.test.ts.
 */
import { waitFor } from '../../harness/wait';
import { POLL_MS, useRecordMove } from '../helpers/record-move';

const { h, replica, router, poller, nodesIn, pastGrace } = useRecordMove('lp');

describe('a lora-poller on a record a change to other state took over, that runtime left', () => {
  it('keeps its polling settings on the runtime its record now leads to', async () => {
    const p = h.prefix();
    const a = h.redis.config(p, { database: 0, timeout: 2000 });
    const a2 = h.redis.config(p, { database: 0, timeout: 3000 });
    const b = h.redis.config(p, { database: 1 });
    const c = h.redis.config(p, { database: 0, timeout: 4000 });
    const [r1, r2] = [await replica(), await replica()];
    router(`${p}route`, a, 1, [r1.url]);
    const pollerRt = poller(`${p}poller`, a2, 2);
    const db1 = router(`${p}route`, b, 3, [r1.url]).runtime;
    await waitFor(async () => (await nodesIn(b)).includes(db1.leasePrefix), 5000, 'the node on database 1');
    const back = router(`${p}route`, c, 4, [r2.url]).runtime;
    await waitFor(async () => (await nodesIn(c)).includes(back.leasePrefix), 5000, 'the node on database 0');
    pastGrace();
    await waitFor(() => db1.current() !== db1, 5000, 'database 1 retired');
    expect({
      pollerOn: pollerRt.current() === back,
      intervalMs: back.poller.intervalMs,
      polling: back.poller.running,
    }).toEqual({ pollerOn: true, intervalMs: POLL_MS, polling: true });
  }, 30_000);
});
