/**
 * IdleUnload alone (src/adapters/idle-unload.ts), on a virtual clock, a store that records its locks
 * and a replica that records its calls: the survivors of `npm run mutation:safety -- idle-unload`
 * (docs/reliability/mutation-testing.md). The caller's wait bounds every victim tried, every read
 * and the unload call; a lock the store no longer holds, or held past its time by this node's
 * clock, unloads nothing; a replica that did not answer, or whose word came too late, ends the
 * round; a busy victim is not asked again; a failed unload tries the next victim.
 */
import { IdleUnload } from '../../src/adapters/idle-unload';
import { ReplicaWord } from '../../src/adapters/replica-word';
import type { ReplicaActivity, ReplicaApi, UnloadOutcome } from '../../src/backends/replica-api';
import { sleep, VirtualClock } from '../../src/clock';
import type { FleetStore } from '../../src/fleet/store';
import type { ResidentAdapter } from '../../src/fleet/types';
import { silentLogger } from '../../src/log';

const U = 'http://r1:8000';
const T0 = 100_000;
const LOAD_TIMEOUT = 1000;
/** The replica word's read timeout (ReplicaWord.timeoutMs). */
const READ_MS = 1000;

/** Grants every unload lock (after `beginMs`); `holds` answers `held`. */
class LockStore {
  begun: string[] = [];
  held = true;
  beginMs = 0;
  /** What each unload was for, and the limit its room is judged by (beginUnload). */
  rooms: [string | undefined, number | undefined][] = [];
  constructor(private readonly clock: VirtualClock) {}
  async beginUnload(
    _url: string,
    name: string,
    _at: number,
    _ttl: number,
    forAdapter?: string,
    limit?: number,
  ): Promise<number> {
    this.begun.push(name);
    this.rooms.push([forAdapter, limit]);
    if (this.beginMs > 0) await sleep(this.clock, this.beginMs);
    return this.begun.length;
  }
  async holds(): Promise<boolean> {
    return this.held;
  }
}

/** Answers what runs after `wordMs` (or fails when `unanswered`); records each call's timeout. */
class Replica implements ReplicaApi {
  asks: { name: string; timeoutMs: number }[] = [];
  unloads: { name: string; timeoutMs: number }[] = [];
  busy: string[] = [];
  unanswered = false;
  /** Each ask's delay in turn (the last repeats). */
  wordMs = [5];
  failUnloadOf = new Set<string>();
  constructor(private readonly clock: VirtualClock) {}
  async scrape(): Promise<never> {
    throw new Error('not used');
  }
  async loadAdapter(): Promise<never> {
    throw new Error('not used');
  }
  async activity(_url: string, timeoutMs: number, names?: readonly string[]): Promise<ReplicaActivity> {
    const ms = this.wordMs[Math.min(this.asks.length, this.wordMs.length - 1)]!;
    this.asks.push({ name: names?.[0] ?? '', timeoutMs });
    await sleep(this.clock, ms);
    if (this.unanswered) throw new Error('connect ECONNREFUSED');
    return { busy: [...this.busy] };
  }
  async unloadAdapter(_url: string, name: string, timeoutMs: number): Promise<UnloadOutcome> {
    this.unloads.push({ name, timeoutMs });
    if (this.failUnloadOf.has(name)) throw new Error('unload refused');
    return 'unloaded';
  }
}

async function sleepOn(clock: VirtualClock, ms: number): Promise<void> {
  const done = sleep(clock, ms);
  await clock.run();
  await done;
}

const resident = (name: string, lastUsed: number): ResidentAdapter => ({
  name,
  state: 'loaded',
  since: 0,
  lastUsed,
  inFlight: 0,
});

/** A virtual clock started well past 0, so a time measured from the wrong origin shows. */
async function setup() {
  const clock = new VirtualClock();
  await sleepOn(clock, T0);
  const store = new LockStore(clock);
  const replica = new Replica(clock);
  const word = new ReplicaWord(replica, clock, silentLogger);
  word.timeoutMs = () => READ_MS;
  const finished: { adapter: string; ok: boolean }[] = [];
  const records: { adapter: string; ok: boolean; ms: number; why?: string }[] = [];
  const unload = new IdleUnload(
    store as unknown as FleetStore,
    replica,
    clock,
    word,
    () => null,
    async (_url, adapter, _fence, ok) => {
      finished.push({ adapter, ok });
    },
    (r, why) => records.push({ adapter: r.adapter, ok: r.ok, ms: r.ms, ...(why ? { why } : {}) }),
  );
  const policy = { loadTimeoutMs: LOAD_TIMEOUT, isStatic: () => false };
  /** Two idle victims, `a` the cheaper. */
  const victims = [resident('b', 2), resident('a', 1)];
  const evict = async (until = Infinity): Promise<boolean> => {
    const p = unload.evictOne(U, victims, policy, (v) => v.lastUsed, 'new', 3, until);
    await clock.run();
    return p;
  };
  return { clock, store, replica, finished, records, evict };
}

describe('IdleUnload: the caller’s wait bounds the unload', () => {
  it('tries no victim once the wait is over, nor at its end', async () => {
    for (const left of [0, -1]) {
      const { clock, store, replica, evict } = await setup();
      expect(await evict(clock.now() + left)).toBe(false);
      expect(store.begun).toEqual([]);
      expect(replica.asks).toEqual([]);
    }
  });

  it('gives each ask, and the unload call, no more than the wait has left', async () => {
    const { clock, replica, evict } = await setup();
    expect(await evict(clock.now() + 900)).toBe(true);
    expect(replica.asks).toEqual([{ name: 'a', timeoutMs: 300 }]);
    // The word came back 5 ms after asking: 895 ms left for the call (below the load timeout).
    expect(replica.unloads).toEqual([{ name: 'a', timeoutMs: 895 }]);
  });

  it('a word that comes back when the wait is over unloads nothing, and ends the round', async () => {
    const { clock, replica, finished, evict } = await setup();
    replica.wordMs = [100];
    expect(await evict(clock.now() + 100)).toBe(false);
    expect(replica.unloads).toEqual([]);
    expect(finished).toEqual([{ adapter: 'a', ok: false }]);
  });
});

describe('IdleUnload: the room it makes', () => {
  it('names the adapter it makes room for and the limit the store judges that room by', async () => {
    const { store, evict } = await setup();
    expect(await evict()).toBe(true);
    expect(store.rooms).toEqual([['new', 3]]);
  });
});

describe('IdleUnload: the lock must still be this unload’s', () => {
  it('a lock the store no longer holds unloads nothing', async () => {
    const { store, replica, evict } = await setup();
    store.held = false;
    expect(await evict()).toBe(false);
    expect(store.begun).toEqual(['a', 'b']);
    expect(replica.asks).toEqual([]);
    expect(replica.unloads).toEqual([]);
  });

  it('a lock held up to its time less the margin, by this node’s clock, unloads nothing', async () => {
    const { store, replica, finished, evict } = await setup();
    // The lock's TTL is the load timeout, two reads and the margin: the word, fresh, comes back
    // exactly when the TTL less the margin has passed since the lock was asked for.
    const ttlLessMargin = LOAD_TIMEOUT + 2 * READ_MS;
    store.beginMs = ttlLessMargin - 5;
    expect(await evict()).toBe(false);
    expect(replica.unloads).toEqual([]);
    // Lost: ended as not done (the in-process store's locks never lapse), never as unloaded.
    expect(finished).toEqual([
      { adapter: 'a', ok: false },
      { adapter: 'b', ok: false },
    ]);
  });
});

describe('IdleUnload: what ends the round, what tries the next victim', () => {
  it('a replica that did not answer ends the round at the first victim', async () => {
    const { store, replica, records, evict } = await setup();
    replica.unanswered = true;
    expect(await evict()).toBe(false);
    expect(store.begun).toEqual(['a']);
    expect(records).toEqual([]);
  });

  it('a word too late twice (stale) ends the round at the first victim', async () => {
    const { store, replica, evict } = await setup();
    replica.wordMs = [200];
    expect(await evict()).toBe(false);
    expect(store.begun).toEqual(['a']);
    expect(replica.asks.map((a) => a.name)).toEqual(['a', 'a']);
  });

  it('a victim the replica reported busy in this round is not locked or asked again, and no unload is recorded', async () => {
    const { store, replica, records, finished, evict } = await setup();
    replica.busy = ['a', 'b'];
    expect(await evict()).toBe(false);
    expect(store.begun).toEqual(['a']);
    expect(replica.asks).toHaveLength(1);
    expect(finished).toEqual([{ adapter: 'a', ok: false }]);
    expect(records).toEqual([]);
  });

  it('a failed unload is recorded with its reason and the next victim tried', async () => {
    const { clock, replica, records, evict } = await setup();
    replica.failUnloadOf.add('a');
    replica.wordMs = [7];
    const at = clock.now();
    expect(await evict()).toBe(true);
    expect(replica.unloads.map((u) => u.name)).toEqual(['a', 'b']);
    expect(records).toEqual([
      { adapter: 'a', ok: false, ms: 7, why: 'unload refused' },
      { adapter: 'b', ok: true, ms: 7 },
    ]);
    expect(clock.now() - at).toBe(14);
  });
});
