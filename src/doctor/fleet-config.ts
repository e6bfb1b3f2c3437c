import type { Backend } from '../fleet/types';

/** A replica to check, with what the router configuration asks of it. */
export interface DoctorTarget {
  url: string;
  backend?: Backend;
  maxLoadedAdapters?: number;
}

export interface DoctorFleet {
  targets: DoctorTarget[];
  /** Adapter name -> path, from the router configurations (`adapters`, `adapter_path_template`). */
  adapterPath: (name: string) => string | undefined;
}

interface RouterConfig {
  replicas?: { url?: unknown; backend?: unknown }[];
  max_loaded_adapters?: unknown;
  adapters?: { name?: unknown; path?: unknown }[];
  adapter_path_template?: unknown;
}

/**
 * The replicas of every `lora-router` plugin in a Kong declarative configuration (decK format:
 * top-level `plugins`, or under services and routes), with each one's `max_loaded_adapters`.
 * Throws with a message saying what is missing.
 */
export function fleetFromKongConfig(doc: unknown): DoctorFleet {
  const configs: RouterConfig[] = [];
  const visit = (node: unknown): void => {
    if (Array.isArray(node)) return node.forEach(visit);
    if (node === null || typeof node !== 'object') return;
    const o = node as Record<string, unknown>;
    if (o.name === 'lora-router' && o.config && typeof o.config === 'object')
      configs.push(o.config as RouterConfig);
    for (const v of Object.values(o)) visit(v);
  };
  visit(doc);
  if (configs.length === 0) throw new Error('the configuration has no lora-router plugin');
  const byUrl = new Map<string, DoctorTarget>();
  const paths = new Map<string, string>();
  const templates: string[] = [];
  for (const c of configs) {
    const max = typeof c.max_loaded_adapters === 'number' ? c.max_loaded_adapters : undefined;
    for (const r of c.replicas ?? []) {
      if (typeof r?.url !== 'string') continue;
      const url = r.url.replace(/\/+$/, '');
      const backend = r.backend === 'llamacpp' ? 'llamacpp' : 'vllm';
      byUrl.set(url, { url, backend, ...(max === undefined ? {} : { maxLoadedAdapters: max }) });
    }
    for (const a of c.adapters ?? [])
      if (typeof a?.name === 'string' && typeof a.path === 'string') paths.set(a.name, a.path);
    if (typeof c.adapter_path_template === 'string') templates.push(c.adapter_path_template);
  }
  if (byUrl.size === 0) throw new Error('no lora-router plugin lists replicas');
  return {
    targets: [...byUrl.values()],
    adapterPath: (name) => paths.get(name) ?? templates[0]?.replace('{name}', name),
  };
}

/** `--replicas URL,...` (a URL may be written `llamacpp=URL` or `vllm=URL`; else detected). */
export function fleetFromUrls(list: string, maxLoadedAdapters?: number): DoctorTarget[] {
  return list
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
    .map((s) => {
      const m = /^(vllm|llamacpp)=(.+)$/.exec(s);
      const url = (m ? m[2]! : s).replace(/\/+$/, '');
      return {
        url,
        ...(m ? { backend: m[1] as Backend } : {}),
        ...(maxLoadedAdapters === undefined ? {} : { maxLoadedAdapters }),
      };
    });
}
