import type { AdapterCatalog } from '../adapters/catalog';
import type { FleetDump } from '../fleet/store';

/**
 * What the fleet can serve, in vLLM's `/v1/models` format: one replica would list only its own.
 * The base model, the configured adapters, then every other adapter a replica of this
 * configuration holds.
 */
export function modelList(
  baseModel: string | undefined,
  catalog: AdapterCatalog,
  dump: FleetDump,
  urls: readonly string[],
): unknown {
  const created = Math.floor(Date.now() / 1000);
  const card = (id: string, root: string | null, parent: string | null) => ({
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
