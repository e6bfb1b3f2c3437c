/**
 * ReplicaWord's bounds in time, alone on a virtual clock (the mutants test/core/replica-word.test.ts
 * left: docs/reliability/mutation-testing.md): what the access phase has left bounds every read of
 * the replica, none is made once nothing is left, and the after-load check asks no longer than its bound.
 */
import type { ReplicaActivity, ReplicaApi } from '../../src/backends/replica-api';
import { sleep, VirtualClock } from '../../src/clock';
import { silentLogger } from '../../src/log';
import { ReplicaWord } from '../../src/adapters/replica-word';

const U = 'http://r1:8000';

/** Records each read's timeout; activity answers after `delays[i]` (the last repeats), idle. */
class TimedApi implements ReplicaApi {
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
    return { busy: [] };
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
