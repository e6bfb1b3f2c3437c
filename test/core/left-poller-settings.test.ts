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

const { pollerLeftBehind } = useRecordMove('lp');

describe('a lora-poller on a record a change to other state took over, that runtime left', () => {
  it('keeps its polling settings on the runtime its record now leads to', async () => {
    const { pollerRt, db1, back } = await pollerLeftBehind();
    await waitFor(() => db1.current() !== db1, 5000, 'database 1 retired');
    expect({
      pollerOn: pollerRt.current() === back,
      intervalMs: back.poller.intervalMs,
      polling: back.poller.running,
    }).toEqual({ pollerOn: true, intervalMs: POLL_MS, polling: true });
  }, 30_000);
});
