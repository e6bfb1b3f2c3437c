import type { AdapterCatalog } from '../adapters/catalog';
import type { FleetDump } from '../fleet/store';

/** One entry of `/v1/models`, in vLLM's `ModelCard` shape (OpenAI's model object and more). */
export interface ModelCard {
  id: string;
  object: 'model';
  created: number;
  owned_by: string;
  root: string | null;
  parent: string | null;
  max_model_len: number | null;
}

export interface ModelList {
  object: 'list';
  data: ModelCard[];
}

/**
 * What the fleet can serve, in vLLM's `/v1/models` format: one replica would list only its own.
 * The base model, the configured adapters, then every other adapter a replica of this
 * configuration holds. A listed on-demand adapter is offered only if the router may load it
 * (`loads`) or a replica holds it: otherwise a request for it could never be served.
 */
export function modelList(
  baseModel: string | undefined,
  catalog: AdapterCatalog,
  dump: FleetDump,
  urls: readonly string[],
  loads: boolean,
): ModelList {
  const created = Math.floor(Date.now() / 1000);
  const card = (id: string, root: string | null, parent: string | null): ModelCard => ({
    id,
    object: 'model',
    created,
    owned_by: 'kong-lora-router',
    root,
    parent,
    max_model_len: null,
  });
  const base = baseModel ?? null;
  const data = base ? [card(base, base, null)] : [];
  const seen = new Set<string>(base ? [base] : []);
  for (const a of catalog.registered()) {
    if (!a.static && !loads) continue;
    seen.add(a.name);
    data.push(card(a.name, a.path ?? null, base));
  }
  for (const r of dump.replicas) {
    if (!urls.includes(r.url)) continue;
    for (const a of r.adapters) {
      if (seen.has(a.name) || a.state === 'unloading') continue;
      seen.add(a.name);
      data.push(card(a.name, null, base));
    }
  }
  return { object: 'list', data };
}
