import type { FleetStore } from '../../src/fleet/store';

/**
 * The in-process store made to answer views, acquires and releases only as promises, as a shared
 * store does (FleetStore.viewsNow, acquireNow, releaseNow left out): for a test that wraps those
 * methods to count them, or to let another node act while one is under way. The request path
 * otherwise takes the in-call steps and the wrapped method never runs.
 */
export function asRoundTrips(store: FleetStore): void {
  store.viewsNow = undefined;
  store.acquireNow = undefined;
  store.releaseNow = undefined;
}
