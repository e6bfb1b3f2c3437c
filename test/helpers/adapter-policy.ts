import type { AdapterPolicy } from '../../src/adapters/manager';

/** An AdapterManager policy for unit tests: 2 slots, 1 s loads, 500 ms queue, nothing static. */
export const adapterPolicy = (over: Partial<AdapterPolicy> = {}): AdapterPolicy => ({
  maxLoadedAdapters: 2,
  loadTimeoutMs: 1000,
  queueTimeoutMs: 500,
  backoffBaseMs: 1000,
  backoffMaxMs: 8000,
  isStatic: () => false,
  ...over,
});
