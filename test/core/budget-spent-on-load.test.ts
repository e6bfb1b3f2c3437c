/**
 * The cold-load budget counts loads, not attempts: a request refused for want of a slot (every
 * loaded adapter busy until its queue timeout) starts no load, so it must not spend the budget.
 * Found in the 30-minute fault run (seed 11, 2026-12-03): 28 loads in 30 minutes against a budget
 * of 20 a minute, 556 requests refused 503 `adapter_slots_busy` and 15,049 refused 429 "the fleet
 * has started its allowed adapter loads for this minute" though no load had started. In process:
 * the real AdapterManager on the memory store, a stand-in replica API on a virtual clock.
 */
import { AdapterManager } from '../../src/adapters/manager';
import type { LoadOutcome, ReplicaActivity, ReplicaApi, UnloadOutcome } from '../../src/backends/replica-api';
import { sleep, VirtualClock } from '../../src/clock';
import { RouterError } from '../../src/errors';
import { MemoryFleetStore } from '../../src/fleet/memory-store';
import { silentLogger } from '../../src/log';
import { adapterPolicy } from '../helpers/adapter-policy';

const U = 'http://r1:8000';

class Api implements ReplicaApi {
  calls: string[] = [];
  /** What the replica reports running or waiting (vLLM's `lora_requests_info`). */
  busy: string[] = [];
  constructor(private clock: VirtualClock) {}
  async scrape(): Promise<never> {
    throw new Error('not used');
  }
  async loadAdapter(_url: string, name: string): Promise<LoadOutcome> {
    this.calls.push(`load ${name}`);
    await sleep(this.clock, 100);
    return 'loaded';
  }
  async activity(): Promise<ReplicaActivity> {
    return { busy: [...this.busy] };
  }
  async unloadAdapter(_url: string, name: string): Promise<UnloadOutcome> {
    this.calls.push(`unload ${name}`);
    return 'unloaded';
  }
}

async function world() {
  const clock = new VirtualClock();
  const store = new MemoryFleetStore();
  await store.upsertReplica({ url: U, backend: 'vllm', priority: 0 });
  await store.applySnapshot(U, { at: 0, ok: true, registry: [] });
  const api = new Api(clock);
  const mgr = new AdapterManager(store, api, clock, silentLogger);
  const spends: string[] = [];
  const ensure = async (name: string) => {
    const p = mgr
      .ensure(
        U,
        { name, path: `/adapters/${name}` },
        adapterPolicy({ maxLoadedAdapters: 1 }),
        undefined,
        async () => {
          spends.push(name);
        },
      )
      .then(
        (outcome) => outcome,
        (err: unknown) => err,
      );
    await clock.run();
    return p;
  };
  return { store, api, spends, ensure, clock };
}

describe('the cold-load budget is spent by loads only', () => {
  it('a request refused 503 for want of a slot spends nothing', async () => {
    const { store, api, spends, ensure } = await world();
    expect(await ensure('a')).toBe('loaded');
    await store.acquire({ id: 'La', url: U, adapter: 'a', at: 0 }); // the only slot, busy
    const refused = await ensure('b');
    expect(refused).toBeInstanceOf(RouterError);
    expect((refused as RouterError).code).toBe('adapter_slots_busy');
    expect(api.calls).toEqual(['load a']);
    expect(spends).toEqual(['a']);
  });

  it('a request refused 503 because the replica reports the only victim busy (no lease holds it) spends nothing', async () => {
    // The fault run's case: a node cut off from Redis runs requests the shared leases do not
    // show, so the store counts the adapter idle and the replica's word keeps it.
    const { api, spends, ensure } = await world();
    expect(await ensure('a')).toBe('loaded');
    api.busy = ['a'];
    const refused = await ensure('b');
    expect((refused as RouterError).code).toBe('adapter_slots_busy');
    expect(api.calls).toEqual(['load a']);
    expect(spends).toEqual(['a']);
  });

  it('a request that waits for the slot and then loads spends once', async () => {
    const { store, api, spends, ensure, clock } = await world();
    expect(await ensure('a')).toBe('loaded');
    await store.acquire({ id: 'La', url: U, adapter: 'a', at: 0 });
    setTimeout(() => void store.release('La', clock.now()), 0);
    // Released while b waits for room (its 500 ms queue timeout): a is unloaded, b loaded.
    const p = ensure('b');
    await store.release('La', clock.now());
    expect(await p).toBe('loaded');
    expect(api.calls).toEqual(['load a', 'unload a', 'load b']);
    expect(spends).toEqual(['a', 'b']);
  });
});
