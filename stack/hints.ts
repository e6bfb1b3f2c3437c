/**
 * The models `npm start`'s "Try:" lines name: only ones the running fleet serves, so the first
 * curl a user copies answers 200.
 */

interface Adapter {
  name: string;
  path?: string;
  static?: boolean;
}

export interface Examples {
  base: string;
  /** A configured adapter the router loads on first use, if it can load any. */
  onDemand?: string;
  /** A configured start-up (static) adapter a replica holds now. */
  resident?: string;
}

/**
 * The base model; an on-demand adapter when a vLLM replica is there to load it and
 * `max_loaded_adapters` lets the router load (0: it never does; llama.cpp loads nothing at run
 * time); a static adapter a replica reports holding: vLLM lists it by name in `/v1/models`,
 * llama.cpp by path in `/lora-adapters`.
 */
export async function servedExamples(
  config: Record<string, unknown>,
  replicas: { backend: string; url: string }[],
): Promise<Examples> {
  const adapters = (config.adapters as Adapter[] | undefined) ?? [];
  const loads = Number(config.max_loaded_adapters ?? 0) > 0 && replicas.some((r) => r.backend === 'vllm');
  const held = new Set((await Promise.all(replicas.map(residentOn))).flat());
  return {
    base: config.base_model as string,
    onDemand: loads ? adapters.find((a) => !a.static)?.name : undefined,
    resident: adapters.find((a) => a.static && (held.has(a.name) || (a.path && held.has(a.path))))?.name,
  };
}

/** What a replica holds: adapter names (vLLM) or paths (llama.cpp); nothing if it does not answer. */
async function residentOn(r: { backend: string; url: string }): Promise<string[]> {
  const signal = AbortSignal.timeout(2000);
  try {
    if (r.backend === 'llamacpp') {
      const list = (await (await fetch(`${r.url}/lora-adapters`, { signal })).json()) as { path?: string }[];
      return Array.isArray(list) ? list.flatMap((a) => (a.path ? [a.path] : [])) : [];
    }
    const models = (await (await fetch(`${r.url}/v1/models`, { signal })).json()) as {
      data?: { id: string; parent?: string | null }[];
    };
    return (models.data ?? []).filter((m) => m.parent).map((m) => m.id);
  } catch {
    return [];
  }
}
