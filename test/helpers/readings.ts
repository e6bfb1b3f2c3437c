import type { ReplicaLoad } from '../../src/metrics/replica-load';

/** A replica's `/metrics` reading with `active` running (the unseen hold's suites). */
export const busyReading = (active: string[]): ReplicaLoad => ({
  running: active.length,
  waiting: 0,
  activeAdapters: active,
  malformedLines: 0,
  reportsActivity: true,
});
