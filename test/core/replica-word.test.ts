/**
 * Unit test of ReplicaWord's freshness bound (one module; the real-parts proof is
 * test/core/unload-window.test.ts): an idle word is acted on only within `freshMs` of asking.
 */
import type { ReplicaActivity, ReplicaApi } from '../../src/backends/replica-api';
import { sleep, VirtualClock, type Clock } from '../../src/clock';
import { silentLogger } from '../../src/log';
import { FRESH_WORD_MS, ReplicaWord, UNSEEN_HOLD_MS, type Withheld } from '../../src/adapters/replica-word';

const U = 'http://r1:8000';

/** Answers `busy` after `delays[i]` ms of virtual time for the i-th ask (the last one repeats). */
class SlowWordApi implements ReplicaApi {
  asked = 0;
  /** Virtual time of each activity ask. */
  askedAt: number[] = [];
  constructor(
    private readonly clock: VirtualClock,
    private readonly delays: number[],
    public busy: string[] = [],
    private readonly listed: string[] = [],
    /** How long the registry list takes to answer. */
    private readonly listMs = 0,
  ) {}
  async scrape(): Promise<never> {
    throw new Error('not used');
  }
  async loadAdapter(): Promise<never> {
    throw new Error('not used');
  }
  async unloadAdapter(): Promise<never> {
    throw new Error('not used');
  }
  /** The activity read fails (the replica did not answer /metrics) after its delay. */
  unanswered = false;
  /** The adapters each activity ask named. */
  names: (readonly string[] | undefined)[] = [];
  /** What the registry read answers instead of the list: undefined (cannot list) or a failure. */
  registry: 'list' | 'cannot list' | 'fails' = 'list';
  async activity(_url: string, _timeoutMs: number, names?: readonly string[]): Promise<ReplicaActivity> {
    this.names.push(names);
    this.askedAt.push(this.clock.now());
    const ms = this.delays[Math.min(this.asked++, this.delays.length - 1)]!;
    await sleep(this.clock, ms);
    if (this.unanswered) throw new Error('connect ECONNREFUSED');
    return { busy: [...this.busy] };
  }
  async residency(): Promise<{ name: string; path: string }[] | undefined> {
    await sleep(this.clock, this.listMs);
    if (this.registry === 'fails') throw new Error('connect ECONNREFUSED');
    if (this.registry === 'cannot list') return undefined;
    return this.listed.map((name) => ({ name, path: `/adapters/${name}` }));
  }
}

function setup(delays: number[], busy: string[] = [], listed: string[] = [], listMs = 0) {
  const clock = new VirtualClock();
  const api = new SlowWordApi(clock, delays, busy, listed, listMs);
  const word = new ReplicaWord(api, clock, silentLogger);
  const withheld: Withheld[] = [];
  word.addWithheldListener((w) => withheld.push(w));
  const run = async <T>(p: Promise<T>): Promise<T> => {
    await clock.run();
    return p;
  };
  return { clock, api, word, withheld, run };
}

describe('ReplicaWord: an idle word is acted on only while fresh', () => {
  it('acts on an idle answer that came back within the bound, asking once', async () => {
    const { api, word, run } = setup([FRESH_WORD_MS]);
    expect(await run(word.idleNow(U, 'a', new Set()))).toBeUndefined();
    expect(api.asked).toBe(1);
  });

  it('asks again after a slow idle answer, and acts on a fresh second one', async () => {
    const { api, word, withheld, run } = setup([FRESH_WORD_MS + 1, 5]);
    expect(await run(word.idleNow(U, 'a', new Set()))).toBeUndefined();
    expect(api.asked).toBe(2);
    expect(withheld).toEqual([]);
  });

  it('withholds the unload (stale) when both idle answers come back too late', async () => {
    const { api, word, withheld, run } = setup([FRESH_WORD_MS + 1]);
    expect(await run(word.idleNow(U, 'a', new Set()))).toBe('stale');
    expect(api.asked).toBe(2);
    expect(withheld).toEqual([{ url: U, adapter: 'a', reason: 'stale' }]);
  });

  it('stops at once when the caller’s lock is gone after the answer', async () => {
    const { api, word, run } = setup([FRESH_WORD_MS + 1]);
    expect(await run(word.idleNow(U, 'a', new Set(), 1000, () => false))).toBe('lost');
    expect(api.asked).toBe(1);
  });

  it('a busy answer withholds whatever its age, and says so to the listeners', async () => {
    const { api, word, withheld, run } = setup([5], ['a', 'b']);
    const reportedBusy = new Set<string>();
    expect(await run(word.idleNow(U, 'a', reportedBusy))).toBe('busy');
    expect(withheld).toEqual([{ url: U, adapter: 'a', reason: 'busy' }]);
    expect([...reportedBusy].sort()).toEqual(['a', 'b']);
    // The adapter is named in the ask: a name the report cannot carry is then read busy (1a).
    expect(api.names).toEqual([['a']]);
  });

  it('an adapter reported busy with no lease here stays withheld for UNSEEN_HOLD_MS after, however idle it reads', async () => {
    const { api, word, withheld, run, clock } = setup([5], ['a']);
    expect(await run(word.idleNow(U, 'a', new Set()))).toBe('busy');
    api.busy = [];
    // Idle now, 5 ms after the busy word: a router this node cannot see is between two requests.
    expect(await run(word.idleNow(U, 'a', new Set()))).toBe('busy');
    expect(await run(word.idleNow(U, 'b', new Set()))).toBeUndefined(); // only the adapter reported
    expect(await run(word.idleNow('http://r2:8000', 'a', new Set()))).toBeUndefined(); // on that replica
    await run(sleep(clock, UNSEEN_HOLD_MS - 30));
    expect(await run(word.idleNow(U, 'a', new Set()))).toBe('busy');
    await run(sleep(clock, 30));
    expect(await run(word.idleNow(U, 'a', new Set()))).toBeUndefined();
    expect(withheld.map((w) => w.reason)).toEqual(['busy', 'busy', 'busy']);
  });

  it('the unseen hold ends when the clock stepped back past it', async () => {
    const { api, run } = setup([0], ['a']);
    let t = 10_000;
    const clock: Clock = { now: () => t, after: (_ms, fn) => (fn(), () => undefined) };
    const word = new ReplicaWord(api, clock, silentLogger);
    expect(await run(word.idleNow(U, 'a', new Set()))).toBe('busy');
    api.busy = [];
    t -= UNSEEN_HOLD_MS - 1;
    expect(await run(word.idleNow(U, 'a', new Set()))).toBe('busy');
    t -= 1;
    expect(await run(word.idleNow(U, 'a', new Set()))).toBeUndefined();
  });

  it('a word whose age is negative (the router clock stepped back) is not fresh', async () => {
    const { api, run } = setup([0]);
    let t = 10_000;
    // Every reading 100 ms earlier than the last: the answer seems to come before the ask.
    const back: Clock = { now: () => (t -= 100), after: (_ms, fn) => (fn(), () => undefined) };
    const word = new ReplicaWord(api, back, silentLogger);
    const withheld: Withheld[] = [];
    word.addWithheldListener((w) => withheld.push(w));
    expect(await run(word.idleNow(U, 'a', new Set()))).toBe('stale');
    expect(withheld).toEqual([{ url: U, adapter: 'a', reason: 'stale' }]);
  });

  it('a replica that does not answer what it runs withholds the unload (unreachable): no word is not an idle word', async () => {
    const { api, word, withheld, run } = setup([5]);
    api.unanswered = true;
    const reportedBusy = new Set<string>();
    expect(await run(word.idleNow(U, 'a', reportedBusy))).toBe('unreachable');
    expect(api.asked).toBe(1);
    expect(withheld).toEqual([{ url: U, adapter: 'a', reason: 'unreachable' }]);
    expect([...reportedBusy]).toEqual([]);
  });

  it('after a load over the limit: a replica that does not answer what it runs keeps the adapter', async () => {
    const { api, word, withheld, run } = setup([5], [], ['a', 'b', 'c']);
    api.unanswered = true;
    expect(await run(word.afterLoad(U, 'c', 2, () => false))).toBe('keep');
    expect(withheld).toEqual([{ url: U, adapter: 'c', reason: 'unreachable' }]);
  });

  it('after a load over the limit: keeps the adapter on a stale idle word, undoes it on a fresh one', async () => {
    const slow = setup([FRESH_WORD_MS + 1], [], ['a', 'b', 'c']);
    expect(await slow.run(slow.word.afterLoad(U, 'c', 2, () => false))).toBe('keep');
    // Asked while the check's bound (at least 2 s) lasted, not forever.
    expect(slow.api.asked).toBe(Math.ceil(2000 / (FRESH_WORD_MS + 1)));
    expect(slow.withheld).toEqual([{ url: U, adapter: 'c', reason: 'stale' }]);
    const fresh = setup([5], [], ['a', 'b', 'c']);
    expect(await fresh.run(fresh.word.afterLoad(U, 'c', 2, () => false))).toBe('undo');
  });

  it('after a load: asks what runs together with the list, so the undo waits for one answer, not two', async () => {
    // The excess lasts from the load landing to the undo's unload (the fault run's (ii) broke
    // with 322 ms of it at load average ~12, three round trips): asking /metrics only once the
    // list came back adds a round trip.
    const { api, word, clock, run } = setup([100], [], ['a', 'b', 'c'], 100);
    expect(await run(word.afterLoad(U, 'c', 2, () => false))).toBe('undo');
    expect(api.askedAt).toEqual([0]);
    expect(clock.now()).toBe(100);
  });

  it('after a load: an idle word made stale by waiting for the list is asked again, then acted on', async () => {
    const { api, word, withheld, run } = setup([5], [], ['a', 'b', 'c'], FRESH_WORD_MS + 1);
    expect(await run(word.afterLoad(U, 'c', 2, () => false))).toBe('undo');
    expect(api.askedAt).toEqual([0, FRESH_WORD_MS + 1]);
    expect(withheld).toEqual([]);
  });

  it('after a load over the limit: a word stale twice (a starved process) is asked again while the check lasts, then acted on', async () => {
    // Fault run seed 5 at load average ~13: every node deciding alone after a Redis restart, the
    // check kept the excess on two slow answers (615 ms), and a node deciding alone trims
    // nothing: 3 adapters on a replica limited to 2 for 4.9 s, until Redis was back.
    const { api, word, clock, run } = setup([FRESH_WORD_MS + 1, FRESH_WORD_MS + 1, 5], [], ['a', 'b', 'c']);
    expect(await run(word.afterLoad(U, 'c', 2, () => false))).toBe('undo');
    expect(api.asked).toBe(3);
    expect(clock.now()).toBe(2 * (FRESH_WORD_MS + 1) + 5);
  });

  it('after a load within the limit: a busy or unreachable word asked with the list counts no withheld unload', async () => {
    const { word, withheld, run } = setup([5], ['c'], ['a', 'c'], 20);
    expect(await run(word.afterLoad(U, 'c', 2, () => false))).toBe('within');
    expect(withheld).toEqual([]);
  });
});

describe('ReplicaWord: its registry, read before a load and after one', () => {
  it('before a load: the adapters holding a slot the store does not know, skipping the one asked for, static, known and unmanaged ones', async () => {
    const { api, word, run } = setup([5], [], ['c', 'static', 'known', 'theirs', 'x', 'y']);
    const told: string[] = [];
    word.isManaged = (name) => name !== 'theirs';
    word.onUnknownResidents = (url) => told.push(url);
    const got = await run(word.occupied(U, 'c', new Set(['known']), (n) => n === 'static'));
    expect(got).toEqual(['x', 'y']);
    expect(told).toEqual([U]);
    // Nothing unknown there: no early poll asked for.
    api.registry = 'list';
    const none = await run(word.occupied(U, 'c', new Set(['known', 'x', 'y']), (n) => n === 'static'));
    expect(none).toEqual([]);
    expect(told).toEqual([U]);
  });

  it("before a load: a replica that cannot list or does not answer leaves it to the store's count (undefined)", async () => {
    const cannot = setup([5], [], ['x']);
    cannot.api.registry = 'cannot list';
    expect(await cannot.run(cannot.word.occupied(U, 'c', new Set(), () => false))).toBeUndefined();
    const fails = setup([5], [], ['x']);
    fails.api.registry = 'fails';
    expect(await fails.run(fails.word.occupied(U, 'c', new Set(), () => false))).toBeUndefined();
    const without = setup([5], [], ['x']);
    (without.api as { residency?: unknown }).residency = undefined;
    expect(await without.run(without.word.occupied(U, 'c', new Set(), () => false))).toBeUndefined();
  });

  it('after a load: static and unmanaged adapters do not count against the limit', async () => {
    const { word, run } = setup([5], [], ['a', 'static', 'theirs', 'c']);
    word.isManaged = (name) => name !== 'theirs';
    expect(await run(word.afterLoad(U, 'c', 2, (n) => n === 'static'))).toBe('within');
  });

  it('after a load: over the limit without the loaded adapter listed is not its excess (within)', async () => {
    const { word, run } = setup([5], [], ['a', 'b', 'd']);
    expect(await run(word.afterLoad(U, 'c', 2, () => false))).toBe('within');
  });

  it('after a load: a replica that cannot list, does not answer or has no registry read is within', async () => {
    for (const registry of ['cannot list', 'fails'] as const) {
      const { api, word, run } = setup([5], [], ['a', 'b', 'c']);
      api.registry = registry;
      expect(await run(word.afterLoad(U, 'c', 0, () => false))).toBe('within');
    }
    const { api, word, run } = setup([5], [], ['a', 'b', 'c']);
    (api as { residency?: unknown }).residency = undefined;
    expect(await run(word.afterLoad(U, 'c', 0, () => false))).toBe('within');
  });
});
