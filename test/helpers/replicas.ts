import type { ReplicaOptions } from '../../sim/fleet';
import type { VllmMetrics } from '../../sim/http/context';

/**
 * A vLLM replica with two start-up adapters, a and b, and room for one adapter per batch: a
 * request of b waits (deferred for the LoRA budget) while one of a runs.
 */
export function oneLoraPerBatch(vllmMetrics: VllmMetrics): ReplicaOptions {
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

/** A router config over every replica, adapters templated under /adapters (most core tests). */
export const templatedRouter = (urls: string[], base: string, extra: Record<string, unknown> = {}) => ({
  replicas: urls.map((url) => ({ url })),
  base_model: base,
  adapter_path_template: '/adapters/{name}',
  ...extra,
});
