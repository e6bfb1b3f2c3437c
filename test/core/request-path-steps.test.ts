import { createHook } from 'node:async_hooks';
import { routeBed } from '../../bench/overhead';

/**
 * In the plugin server each request runs cache-cold, after the process slept in epoll: every
 * async step of the request path (a promise, the frame of the async function that made it, a
 * microtask hop) is paid from memory again, not only its work (docs/benchmarks.md, "The request
 * path inside the plugin server"). So the steps are counted, not timed: the promises one in-process
 * route + release of a resident adapter makes (bench/overhead.ts `routeBed`: 8 replicas, the
 * in-process store, the default configuration), the bed's own three included. 43 before the
 * steps that await nothing were taken out (a POST with a body asks no method, a registration
 * done, views fresh, no guessed lease to wait for, the memory store's release in one step); 26
 * before the in-process store answered views, the lease and its release in the call, admission
 * answered in the call with the adapter there, and the decision was counted on its runtime
 * without a closure (10: the bed's four, then route, decide and placement, and the release).
 */
const MOST_PROMISES = 10;

describe("a resident adapter's route + release, in process", () => {
  it(`makes at most ${MOST_PROMISES} promises`, async () => {
    const bed = await routeBed();
    try {
      for (let i = 0; i < 50; i++) await bed.routeRelease(i);
      const counts: number[] = [];
      for (let i = 50; i < 60; i++) {
        let promises = 0;
        const hook = createHook({ init: (_id, type) => void (type === 'PROMISE' && promises++) }).enable();
        try {
          await bed.routeRelease(i);
        } finally {
          hook.disable();
        }
        counts.push(promises);
      }
      // The fewest: anything else the process runs meanwhile (a timer's callback) only adds.
      expect(Math.min(...counts)).toBeLessThanOrEqual(MOST_PROMISES);
    } finally {
      bed.stop();
    }
  });
});
