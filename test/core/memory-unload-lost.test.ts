/**
 * Found in review: in the in-process store an unload lock never lapses, and IdleUnload ended no
 * unload whose lock it judged lost by its own clock (a stall past the TTL less the margin after the
 * grant): the entry stayed `unloading`. Once a poll leaves every `unloading` entry to its holder,
 * this one had none: the adapter could never be loaded on that replica again. It is now ended as
 * not done (no call was made); in a shared store a newer holder's fence refuses that end.
 */
import { IdleUnload, LOCK_MARGIN_MS } from '../../src/adapters/idle-unload';
import { ReplicaWord } from '../../src/adapters/replica-word';
import type { ReplicaActivity, ReplicaApi, UnloadOutcome } from '../../src/backends/replica-api';
import { sleep, VirtualClock } from '../../src/clock';
import { MemoryFleetStore } from '../../src/fleet/memory-store';
import type { FleetStore } from '../../src/fleet/store';
import { silentLogger } from '../../src/log';

const U = 'http://r1:8000';
const LOAD_TIMEOUT = 1000;
const READ_MS = 1000;

class Replica implements ReplicaApi {
  unloads: string[] = [];
  constructor(private readonly clock: VirtualClock) {}
  async scrape(): Promise<never> {
    throw new Error('not used');
  }
  async loadAdapter(): Promise<never> {
    throw new Error('not used');
  }
  async activity(): Promise<ReplicaActivity> {
    await sleep(this.clock, 5);
    return { busy: [] };
  }
  async unloadAdapter(_url: string, name: string): Promise<UnloadOutcome> {
    this.unloads.push(name);
    return 'unloaded';
  }
}

it('an unload judged lost in the memory store (a stall after its grant) does not keep the adapter unloading forever', async () => {
  const clock = new VirtualClock();
  const mem = new MemoryFleetStore();
  await mem.upsertReplica({ url: U, backend: 'vllm', priority: 0 });
  await mem.applySnapshot(U, { at: 1, ok: true, registry: [] });
  const f = await mem.beginLoad(U, 'a', 2, 4);
  expect(await mem.finishLoad(U, 'a', f!, true, 3)).toBe(true);
  // The process stalls right after the grant, past the lock's TTL less the margin.
  const stalled = Object.create(mem) as MemoryFleetStore;
  stalled.beginUnload = async (...args: Parameters<FleetStore['beginUnload']>) => {
    const fence = await mem.beginUnload(...args);
    await sleep(clock, LOAD_TIMEOUT + 2 * READ_MS);
    return fence;
  };
  const replica = new Replica(clock);
  const word = new ReplicaWord(replica, clock, silentLogger);
  word.timeoutMs = () => READ_MS;
  const ended: boolean[] = [];
  const unload = new IdleUnload(
    stalled,
    replica,
    clock,
    word,
    () => null,
    async (url, adapter, fence, ok) => {
      ended.push(ok);
      await mem.finishUnload(url, adapter, fence, ok, clock.now());
    },
    () => undefined,
  );
  const victim = { name: 'a', state: 'loaded' as const, since: 3, lastUsed: 3, inFlight: 0 };
  const p = unload.evictOne(
    U,
    [victim],
    { loadTimeoutMs: LOAD_TIMEOUT, isStatic: () => false },
    (v) => v.lastUsed,
    'x',
    1, // a fills the replica: no slot free for x (the store refuses a make-room unload beside one)
  );
  await clock.run();
  expect(await p).toBe(false);
  expect(replica.unloads).toEqual([]); // judged lost: no call
  expect(ended).toEqual([false]); // and ended as not done
  expect(LOCK_MARGIN_MS).toBeGreaterThan(0);
  expect((await mem.residents(U)).find((r) => r.name === 'a')?.state).toBe('loaded');
  // The replica restarts: its registry no longer lists a. Polls long after.
  for (const at of [100_000, 200_000])
    await mem.applySnapshot(U, { at, startedAt: at - 1, ok: true, registry: [] });
  expect((await mem.residents(U)).find((r) => r.name === 'a')?.state).toBeUndefined();
  expect(await mem.beginLoad(U, 'a', 300_000, 4)).not.toBeNull();
});
