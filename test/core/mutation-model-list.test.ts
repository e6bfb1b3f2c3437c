/**
 * `/v1/models` (src/router/model-list.ts) alone: what the fleet offers, in vLLM's ModelCard shape.
 * An on-demand adapter is listed only if the router may load it or a replica holds it, a replica
 * of another configuration adds nothing, and an adapter being unloaded is not offered.
 */
import { AdapterCatalog } from '../../src/adapters/catalog';
import type { FleetDump } from '../../src/fleet/store';
import type { ResidentAdapter } from '../../src/fleet/types';
import { modelList } from '../../src/router/model-list';

const catalog = new AdapterCatalog({
  baseModel: 'base',
  adapters: [
    { name: 'sql', path: '/a/sql', static: false },
    { name: 'pinned', path: '/a/pinned', static: true },
    { name: 'nopath', static: false },
  ],
  namePattern: '^[a-z-]+$',
});

const resident = (name: string, state: ResidentAdapter['state'] = 'loaded'): ResidentAdapter => ({
  name,
  state,
  since: 0,
  lastUsed: 0,
  inFlight: 0,
});
const dump = (replicas: { url: string; adapters: ResidentAdapter[] }[]): FleetDump =>
  ({ replicas: replicas.map((r) => ({ ...r, llamaAdapters: [] })) }) as unknown as FleetDump;

describe('modelList', () => {
  it('the base model, the configured adapters, then what this configuration’s replicas hold', () => {
    const before = Math.floor(Date.now() / 1000);
    const list = modelList(
      'base',
      catalog,
      dump([
        { url: 'http://r1', adapters: [resident('sql'), resident('found'), resident('going', 'unloading')] },
        { url: 'http://other', adapters: [resident('elsewhere')] },
        { url: 'http://r2', adapters: [resident('found'), resident('base'), resident('late', 'loading')] },
      ]),
      ['http://r1', 'http://r2'],
      true,
    );
    expect(list.object).toBe('list');
    expect(list.data.map((m) => [m.id, m.root, m.parent])).toEqual([
      ['base', 'base', null],
      ['sql', '/a/sql', 'base'],
      ['pinned', '/a/pinned', 'base'],
      ['nopath', null, 'base'],
      ['found', null, 'base'],
      ['late', null, 'base'],
    ]);
    for (const m of list.data) {
      expect(m).toMatchObject({ object: 'model', owned_by: 'kong-lora-router', max_model_len: null });
      expect(m.created).toBeGreaterThanOrEqual(before);
      expect(m.created).toBeLessThanOrEqual(Math.floor(Date.now() / 1000));
    }
  });

  it('without loads, an on-demand adapter only where a replica holds it; with no base model, no base card', () => {
    const list = modelList(
      undefined,
      catalog,
      dump([{ url: 'http://r1', adapters: [resident('sql')] }]),
      ['http://r1'],
      false,
    );
    expect(list.data.map((m) => [m.id, m.root, m.parent])).toEqual([
      ['pinned', '/a/pinned', null],
      ['sql', null, null],
    ]);
  });
});
