/**
 * A fleet whose replicas join and leave changes the router's configuration each time, and Kong
 * starts new instances of the new configuration and drops the old ones: what the runtime keeps
 * per configuration must go with the last instance of it. The requests held per configuration
 * (src/router/slo-class.ts `heldOn`) were kept by the configuration's whole JSON, for the life of
 * the process.
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { parseRouterConfig } from '../../src/config/parse';
import { silentLogger } from '../../src/log';
import { RouterService } from '../../src/router/router';
import { heldConfigsOn, type HeldClasses } from '../../src/router/slo-class';
import { FleetRuntime } from '../../src/runtime';

/** A configuration of the fleet at step `i`: two replicas, one of which left and was replaced since step i - 1. */
const fleetAt = (i: number) =>
  parseRouterConfig({
    // Closed loopback ports: replicas that left (or never answered) as far as the poller can tell.
    replicas: [{ url: `http://127.0.0.1:${1 + (i % 1000)}` }, { url: `http://127.0.0.1:${2 + (i % 1000)}` }],
    base_model: 'base',
    adapter_path_template: '/adapters/{name}',
    slo_classes: [
      { name: 'interactive', ttft_ms: 2000, priority: 0 },
      { name: 'batch', ttft_ms: 30000, priority: -1 },
    ],
  });

describe('configurations replaced as replicas join and leave', () => {
  let rt: FleetRuntime;
  beforeEach(() => {
    rt = new FleetRuntime({ log: silentLogger, seed: 1, poller: { intervalMs: 60_000 } });
  });
  afterEach(() => rt.stop());

  it('keep the held counts of the configurations still in use only', async () => {
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    const heldOf = (s: RouterService) => (s as unknown as { held: HeldClasses }).held;
    // Two workers' instances of each configuration in turn, the older ones dropped as Kong drops them.
    let current: RouterService[] = [];
    for (let i = 0; i <= 200; i++)
      current = [new RouterService(fleetAt(i), rt), new RouterService(fleetAt(i), rt)];
    heldOf(current[0]!).enter(0);
    // A weak reference made or read in a job keeps its target until the job ends (ECMA-262 AddToKeptObjects).
    await new Promise((r) => setImmediate(r));
    gc();
    // A third worker starts the current configuration, and the fleet changes once more: the
    // configurations no instance uses any more are gone, the current one's count is shared still.
    const third = new RouterService(fleetAt(200), rt);
    const next = new RouterService(fleetAt(201), rt);
    expect(heldConfigsOn(rt)).toBe(2);
    expect(heldOf(third)).toBe(heldOf(current[1]!));
    expect(heldOf(third).above(-1)).toBe(true);
    expect(heldOf(next).above(-1)).toBe(false);
  });
});
