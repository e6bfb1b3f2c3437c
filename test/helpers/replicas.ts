import type { ReplicaOptions } from '../../sim/fleet';

/**
 * A vLLM replica with two start-up adapters, a and b, and room for one adapter per batch: a
 * request of b waits (deferred for the LoRA budget) while one of a runs.
 */
export function oneLoraPerBatch(vllmMetrics: 'released' | 'residency'): ReplicaOptions {
  return {
    vllmMetrics,
    staticAdapters: [
      { name: 'a', path: '/adapters/a' },
      { name: 'b', path: '/adapters/b' },
    ],
    timeScale: 10,
    engine: { maxLoras: 1, maxNumSeqs: 8 },
  };
}
