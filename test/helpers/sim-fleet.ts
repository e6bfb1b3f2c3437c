import { SimFleet, type ReplicaOptions } from '../../sim/fleet';

/**
 * A simulated fleet per test, stopped after each: `start(...specs)` returns the replicas' URLs,
 * `fleet()` the running fleet (its replicas' logs and state).
 */
export function useSimFleet(): {
  start: (...specs: ReplicaOptions[]) => Promise<string[]>;
  fleet: () => SimFleet;
  stop: () => Promise<void>;
} {
  let fleet: SimFleet | undefined;
  const stop = async () => {
    await fleet?.stop();
    fleet = undefined;
  };
  afterEach(stop);
  return {
    start: async (...specs) => {
      fleet = await SimFleet.start(specs);
      return fleet.urls;
    },
    fleet: () => {
      if (!fleet) throw new Error('no simulated fleet is running');
      return fleet;
    },
    stop,
  };
}
