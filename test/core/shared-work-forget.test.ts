/**
 * A runtime replaced on the same state hands its work model to its successor (one node: the
 * replicas' queues hold both runtimes' requests, runtime.ts `passPolling`). What the replaced one
 * polled into it, of a replica the successor's rounds never see listed (the store forgot it
 * between the two), is forgotten by the successor's rounds too (src/runtime-departures.ts;
 * simulation seed 3455548, test/reliability/dst-found/configuration-changes.test.ts).
 */
import { VirtualClock } from '../../src/clock';
import { parseRouterConfig } from '../../src/config/parse';
import { silentLogger } from '../../src/log';
import { RouterService } from '../../src/router/router';
import { FleetRuntime } from '../../src/runtime';
import { IdleReplicaApi } from '../helpers/idle-replicas';

const INTERVAL_MS = 1000;
const KEPT = 'http://10.0.0.1:8000';
/** Listed once by another node's configuration, polled by the replaced runtime, forgotten since. */
const GONE = 'http://10.0.0.2:8000';

describe('a work model handed to a successor on the same state', () => {
  it('forgets a replica the replaced runtime polled into it and the successor never saw listed', async () => {
    const clock = new VirtualClock();
    const api = new IdleReplicaApi(
      () => clock.now(),
      () => true,
    );
    const make = () =>
      new FleetRuntime({
        clock,
        api,
        log: silentLogger,
        seed: 1,
        poller: { intervalMs: INTERVAL_MS, jitter: 0 },
      });
    const old = make();
    const next = make();
    try {
      const config = parseRouterConfig({
        replicas: [{ url: KEPT }],
        base_model: 'base',
        adapter_path_template: '/adapters/{name}',
        saturation_mode: 'predicted',
      });
      new RouterService(config, old, 'plugin-1');
      await clock.run(clock.now() + 3 * INTERVAL_MS);
      // The replaced runtime's poll of a replica its state still listed (another node's): the scrape
      // went into its work model.
      old.work.observeReplica(GONE, { waiting: 0, running: 0 }, clock.now());
      void old.retire(next);
      expect(next.work).toBe(old.work);
      await clock.run(clock.now() + 3 * INTERVAL_MS);
      expect([...next.work.urls()]).toEqual([KEPT]);
    } finally {
      old.stop();
      next.stop();
    }
  });
});
