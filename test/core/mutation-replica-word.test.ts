/**
 * ReplicaWord's bounds in time, alone on a virtual clock (the mutants test/core/replica-word.test.ts
 * left: docs/reliability/mutation-testing.md): what the access phase has left bounds every read of
 * the replica, none is made once nothing is left, and the after-load check asks no longer than its
 * bound. And its log: one line per replica and adapter each 10 s, saying why.
 */
import type { ReplicaActivity, ReplicaApi } from '../../src/backends/replica-api';
import { sleep, VirtualClock } from '../../src/clock';
import { silentLogger, type Logger } from '../../src/log';
import { ReplicaWord } from '../../src/adapters/replica-word';

const U = 'http://r1:8000';

/** Records each read's timeout; activity answers after `delays[i]` (the last repeats), idle. */
class TimedApi implements ReplicaApi {
  busy: string[] = [];
  reads: { what: 'activity' | 'residency'; timeoutMs: number; at: number }[] = [];
  private asked = 0;
  constructor(
    private readonly clock: VirtualClock,
    private readonly delays: number[],
    private readonly listed: string[],
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
  async activity(_url: string, timeoutMs: number): Promise<ReplicaActivity> {
    this.reads.push({ what: 'activity', timeoutMs, at: this.clock.now() });
    await sleep(this.clock, this.delays[Math.min(this.asked++, this.delays.length - 1)]!);
    return { busy: [...this.busy] };
  }
  async residency(_url: string, timeoutMs: number): Promise<{ name: string; path: string }[]> {
    this.reads.push({ what: 'residency', timeoutMs, at: this.clock.now() });
    return this.listed.map((name) => ({ name, path: `/adapters/${name}` }));
  }
}

function setup(delays: number[], listed: string[]) {
  const clock = new VirtualClock();
  const api = new TimedApi(clock, delays, listed);
  const word = new ReplicaWord(api, clock, silentLogger);
  const run = async <T>(p: Promise<T>): Promise<T> => {
    await clock.run();
    return p;
  };
  return { clock, api, word, run };
}

describe('ReplicaWord: the time the access phase has left bounds its reads', () => {
  it('before a load: no registry read once nothing is left (the store decides), and none longer than what is left', async () => {
    const none = setup([5], ['x']);
    expect(await none.run(none.word.occupied(U, 'c', new Set(), () => false, 0))).toBeUndefined();
    expect(none.api.reads).toEqual([]);
    const some = setup([5], ['x']);
    expect(await some.run(some.word.occupied(U, 'c', new Set(), () => false, 300))).toEqual(['x']);
    expect(some.api.reads).toEqual([{ what: 'residency', timeoutMs: 300, at: 0 }]);
  });

  it('after a load: nothing left is within, with no read of the replica', async () => {
    const { api, word, run } = setup([5], ['a', 'b', 'c']);
    expect(await run(word.afterLoad(U, 'c', 2, () => false, 0))).toBe('within');
    expect(api.reads).toEqual([]);
  });

  it('after a load: each read gets a third of what is left (the list, then up to two asks)', async () => {
    const { api, word, run } = setup([5], ['a', 'b', 'c']);
    expect(await run(word.afterLoad(U, 'c', 2, () => false, 900))).toBe('undo');
    expect(api.reads.map((r) => r.timeoutMs)).toEqual([300, 300]);
  });

  it('after a load: a stale word is not asked again once the check reached its bound', async () => {
    // The bound is the read timeout (at least 2 s): two answers of 1000 ms end exactly at it,
    // so the third, fresh answer is never asked for and the excess is kept for the trim.
    const { api, word, clock, run } = setup([1000, 1000, 5], ['a', 'b', 'c']);
    expect(await run(word.afterLoad(U, 'c', 2, () => false))).toBe('keep');
    expect(api.reads.filter((r) => r.what === 'activity').map((r) => r.at)).toEqual([0, 1000]);
    expect(clock.now()).toBe(2000);
  });
});

describe('ReplicaWord: its log, one line per replica and adapter each 10 s', () => {
  const T0 = 100_000;
  /** A clock started well past 0, a replica answering in 5 ms, a logger that keeps its lines. */
  async function logged(delays = [5]) {
    const clock = new VirtualClock();
    const api = new TimedApi(clock, delays, []);
    const lines: string[] = [];
    const log: Logger = { info: () => {}, warn: (m) => lines.push(m), error: () => {} };
    const word = new ReplicaWord(api, clock, log);
    const at = async <T>(t: number, p: () => Promise<T>): Promise<T> => {
      const slept = sleep(clock, t - clock.now());
      await clock.run();
      await slept;
      const got = p();
      await clock.run();
      return got;
    };
    return { api, word, lines, at };
  }

  it('a busy word: said once, again 10 s later, and apart for another adapter', async () => {
    const { api, word, lines, at } = await logged();
    api.busy = ['a', 'b'];
    const withheld = async (t: number, name: string) => at(t, () => word.idleNow(U, name, new Set()));
    expect(await withheld(T0, 'a')).toBe('busy');
    expect(await withheld(T0 + 5_000, 'b')).toBe('busy');
    expect(await withheld(T0 + 9_994, 'a')).toBe('busy');
    expect(lines).toEqual([
      `unload of adapter 'a' on ${U} withheld: the replica reports requests of it running or waiting, though no lease holds it here`,
      `unload of adapter 'b' on ${U} withheld: the replica reports requests of it running or waiting, though no lease holds it here`,
    ]);
    // Each answer comes 5 ms after asking: the first line at T0 + 5, this one exactly 10 s later.
    expect(await withheld(T0 + 10_000, 'a')).toBe('busy');
    expect(lines).toHaveLength(3);
  });

  it('the unseen hold says how long ago the replica reported it busy; a stale word how long it took', async () => {
    const { word, lines, at } = await logged([5, 151]);
    word.holdUnseen(U, 'a', T0);
    expect(await at(T0 + 500, () => word.idleNow(U, 'a', new Set()))).toBe('busy');
    expect(await at(T0 + 600, () => word.idleNow(U, 'c', new Set()))).toBe('stale');
    expect(lines).toEqual([
      `unload of adapter 'a' on ${U} withheld: the replica reported requests of it 505 ms ago with no lease here: a router this node cannot see sends them (held 2000 ms)`,
      `unload of adapter 'c' on ${U} withheld: its word that the adapter is idle took 151 ms to act on (at most 150)`,
    ]);
  });
});
