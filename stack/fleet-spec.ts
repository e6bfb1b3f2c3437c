import type { ReplicaOptions } from '../sim/http/replica';

interface RouterReplica {
  url: string;
  backend?: string;
}
interface RouterAdapter {
  name: string;
  path?: string;
  static?: boolean;
}

/**
 * Adapters the simulated vLLM replicas' adapter folder holds besides the listed ones: the
 * start banner's example and the demo traffic's tenants (`cust-01`...). Any other name a
 * template allows is not there, and its load is vLLM's 404, as on a real replica.
 */
export const SIMULATED_FOLDER_HOLDS = /^(my-adapter|cust-\d+)$/;

/**
 * A simulated fleet shaped like a lora-router config: one simulated replica per configured
 * one, same backend. vLLM replicas load at run time from the template's root; llama.cpp
 * replicas start with the configured static adapters whose paths are .gguf files.
 */
export function fleetFor(config: Record<string, unknown>, timeScale: number): ReplicaOptions[] {
  const replicas = (config.replicas as RouterReplica[] | undefined) ?? [];
  const adapters = (config.adapters as RouterAdapter[] | undefined) ?? [];
  const template = config.adapter_path_template as string | undefined;
  const root = template ? template.slice(0, template.indexOf('{name}')) : '/adapters/';
  const maxLoaded = Number(config.max_loaded_adapters ?? 0);
  const baseModel = config.base_model as string | undefined;
  const gguf = adapters.filter((a) => a.static && a.path?.endsWith('.gguf')).map((a) => ({ path: a.path! }));
  const listedPaths = Object.fromEntries(
    adapters.filter((a) => !a.static && a.path).map((a) => [a.path!, 16]),
  );
  return replicas.map((r) =>
    r.backend === 'llamacpp'
      ? { backend: 'llamacpp', baseModel, staticAdapters: gguf, timeScale, startupMs: 0 }
      : {
          backend: 'vllm',
          baseModel,
          adapterDirs: [root],
          adapterDirHolds: SIMULATED_FOLDER_HOLDS,
          adapterPaths: listedPaths,
          timeScale,
          // Host memory holds what the router may load, plus room for churn.
          engine: {
            maxLoras: Math.max(1, maxLoaded),
            maxCpuLoras: Math.max(2, maxLoaded * 2),
            loadBaseMs: 1500,
            loadMsPerRank: 10,
          },
        },
  );
}
