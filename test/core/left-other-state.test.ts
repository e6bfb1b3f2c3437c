/**
 * A lora-poller whose record a change of its route to other state took over (the same replicas:
 * `claimReplicas` replaced the runtime of both records, one view of a replica per process), its
 * configuration left on the old state, and the route then moved back to that state and other
 * replicas: no plugin's newest configuration names the other state any more, so the runtime there
 * retires past the grace (runtime-registry.ts `retireIfLeft`). Before, the registry followed the
 * poller's record through the replacement to that runtime and kept it for good, polling and a live
 * node of the other state (simulation seed 3402203, test/reliability/dst-found/left-runtime.test.ts).
 * Setup as test/core/review-left.test.ts (through the plugins' entries, a real redis-server).
 */
import { waitFor } from '../../harness/wait';
import { useRecordMove } from '../helpers/record-move';

const { state, pollerLeftBehind } = useRecordMove('lo');

describe('a lora-poller on a record a change to other state took over', () => {
  it('keeps no runtime on the other state once its route moved back and the grace passed', async () => {
    // Back on database 0 (the lora-poller's state), another replica, past the grace.
    const { b, r1, db1, back } = await pollerLeftBehind();
    await waitFor(() => db1.current() !== db1, 5000, 'database 1 retired').catch(() => undefined);
    const db1Now = await state(db1, b, r1);
    // Replica 1 is still database 0's (the lora-poller's state lists it: its runtime there polls it).
    expect({
      db1: { current: db1Now.current, liveNode: db1Now.liveNode, polling: db1.poller.running },
      backCurrent: back.current() === back,
    }).toEqual({ db1: { current: false, liveNode: false, polling: false }, backCurrent: true });
  }, 30_000);
});
