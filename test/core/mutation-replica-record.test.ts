/**
 * Unit test of the in-process store's replica record (src/fleet/replica-record.ts), written against
 * the survivors of its mutation run (docs/reliability/mutation-testing.md): a replica registered
 * reads health unknown; the gone set keeps exactly the last 256 adapters; a llama.cpp replica's
 * view lists its adapter ids and finds an adapter by its whole path or its file name, never by a
 * path it lacks or another file's; a vLLM replica's presence read by slot or by a holder mark.
 */
import { HolderIndex } from '../../src/fleet/holder-index';
import {
  markGone,
  newReplicaRecord,
  putResidency,
  replicaView,
  samePath,
} from '../../src/fleet/replica-record';

const vllm = { url: 'http://v:8000', backend: 'vllm' as const, priority: 0 };
const llama = { url: 'http://l:8080', backend: 'llamacpp' as const, priority: 0 };

describe('replica record', () => {
  it('a replica registered reads health unknown, nothing polled', () => {
    const v = replicaView(newReplicaRecord(vllm));
    expect(v).toMatchObject({ health: 'unknown', snapshotAt: null, checkedAt: null, residentCount: 0 });
    expect(v.llamaIds).toBeUndefined();
  });

  it('remembers exactly the last 256 adapters gone, the oldest out first', () => {
    const r = newReplicaRecord(vllm);
    for (let i = 0; i < 256; i++) markGone(r, `a${i}`, i);
    expect(r.gone.size).toBe(256);
    expect(r.gone.get('a0')).toBe(0);
    markGone(r, 'a0', 300); // again: now the newest
    markGone(r, 'new', 301);
    expect(r.gone.size).toBe(256);
    expect(r.gone.get('a0')).toBe(300);
    expect(r.gone.has('a1')).toBe(false);
    expect(r.gone.get('new')).toBe(301);
  });

  it("a llama.cpp replica lists its adapters' ids and finds one by path or file name", () => {
    const r = newReplicaRecord(llama);
    r.llamaAdapters = [
      { id: 0, path: '/models/lora/x.gguf' },
      { id: 1, path: 'y.gguf' },
    ] as typeof r.llamaAdapters;
    r.inFlightByAdapter.set('x', 2);
    expect(replicaView(r).llamaIds).toEqual([0, 1]);
    expect(replicaView(r, { name: 'x', path: '/models/lora/x.gguf' }).adapter).toStrictEqual({
      state: 'static',
      lastUsed: 0,
      inFlight: 2,
      llamaId: 0,
    });
    expect(replicaView(r, { name: 'y', path: '/elsewhere/y.gguf' }).adapter).toMatchObject({ llamaId: 1 });
    expect(replicaView(r, { name: 'z', path: '/models/lora/z.gguf' }).adapter).toBeUndefined();
    expect(replicaView(r, { name: 'x' }).adapter).toBeUndefined();
  });

  it('matches paths whole or by file name only', () => {
    expect(samePath('/a/x.gguf', '/a/x.gguf')).toBe(true);
    expect(samePath('/a/x.gguf', '/b/x.gguf')).toBe(true);
    expect(samePath('x.gguf', '/b/x.gguf')).toBe(true);
    expect(samePath('/a/x.gguf', '/a/y.gguf')).toBe(false);
    expect(samePath('/a/x', '/a/xx')).toBe(false);
    expect(samePath('/a/bx', '/b/ax')).toBe(false);
  });

  it("a vLLM replica's presence, by slot or by the holder index's mark", () => {
    const index = new HolderIndex();
    const r = newReplicaRecord(vllm, index);
    putResidency(r, 'other', { state: 'loaded', since: 1, lastUsed: 2 });
    putResidency(r, 'x', { state: 'loading', since: 3, lastUsed: 4 });
    const want = { state: 'loading', lastUsed: 4, inFlight: 0 };
    expect(replicaView(r, { name: 'x' }).adapter).toStrictEqual(want);
    expect(replicaView(r, { name: 'x' }, index.mark('x')).adapter).toStrictEqual(want);
    expect(replicaView(r, { name: 'y' }, index.mark('y')).adapter).toBeUndefined();
  });
});
