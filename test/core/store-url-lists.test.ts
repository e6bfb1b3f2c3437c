import { MemoryFleetStore } from '../../src/fleet/memory-store';

/**
 * The in-process store keeps the records of each URL list it is asked about (a router asks with
 * the same list on every request): a list changed in place, or naming a replica registered
 * only later, must still read the replicas it names now.
 */
describe('MemoryFleetStore views by URL list', () => {
  const A = 'http://10.0.0.1:8000';
  const B = 'http://10.0.0.2:8000';
  const C = 'http://10.0.0.3:8000';

  async function store(): Promise<MemoryFleetStore> {
    const s = new MemoryFleetStore();
    for (const url of [A, B]) await s.upsertReplica({ url, backend: 'vllm', priority: 0 });
    return s;
  }
  const urlsOf = async (s: MemoryFleetStore, list: string[]) => (await s.views(list)).map((v) => v.url);

  it('follows a list changed in place', async () => {
    const s = await store();
    const list = [A, B];
    expect(await urlsOf(s, list)).toEqual([A, B]);
    list.reverse();
    expect(await urlsOf(s, list)).toEqual([B, A]);
    list.pop();
    expect(await urlsOf(s, list)).toEqual([B]);
  });

  it('reads a replica registered after the list was first asked about', async () => {
    const s = await store();
    const list = [A, C, B];
    expect(await urlsOf(s, list)).toEqual([A, B]);
    await s.upsertReplica({ url: C, backend: 'vllm', priority: 0 });
    expect(await urlsOf(s, list)).toEqual([A, C, B]);
  });

  it("shows a replica's state as it is now, not as when the list was first read", async () => {
    const s = await store();
    const list = [A, B];
    await s.views(list);
    await s.applySnapshot(A, {
      at: 1,
      ok: true,
      load: { waiting: 3, running: 1, activeAdapters: [], malformedLines: 0 },
    });
    await s.upsertReplica({ url: B, backend: 'vllm', priority: 5 });
    const [a, b] = await s.views(list);
    expect(a!.waiting).toBe(3);
    expect(b!.priority).toBe(5);
  });
});
