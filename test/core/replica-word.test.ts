/**
 * Unit test of ReplicaWord's freshness bound (one module; the real-parts proof is
 * test/core/unload-window.test.ts): an idle word is acted on only within `freshMs` of asking.
 */
import type { ReplicaActivity, ReplicaApi } from '../../src/backends/replica-api';
import { sleep, VirtualClock } from '../../src/clock';
import { silentLogger } from '../../src/log';
import { FRESH_WORD_MS, ReplicaWord, type Withheld } from '../../src/adapters/replica-word';

const U = 'http://r1:8000';

/** Answers `busy` after `delays[i]` ms of virtual time for the i-th ask (the last one repeats). */
class SlowWordApi implements ReplicaApi {
  asked = 0;
  constructor(
    private readonly clock: VirtualClock,
    private readonly delays: number[],
    public busy: string[] = [],
    private readonly listed: string[] = [],
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
  async activity(): Promise<ReplicaActivity> {
    const ms = this.delays[Math.min(this.asked++, this.delays.length - 1)]!;
    await sleep(this.clock, ms);
    return { busy: [...this.busy] };
  }
  async residency(): Promise<{ name: string; path: string }[]> {
    return this.listed.map((name) => ({ name, path: `/adapters/${name}` }));
  }
}

function setup(delays: number[], busy: string[] = [], listed: string[] = []) {
  const clock = new VirtualClock();
  const api = new SlowWordApi(clock, delays, busy, listed);
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

  it('a busy answer withholds whatever its age', async () => {
    const { word, run } = setup([5], ['a']);
    expect(await run(word.idleNow(U, 'a', new Set()))).toBe('busy');
  });

  it('after a load over the limit: keeps the adapter on a stale idle word, undoes it on a fresh one', async () => {
    const slow = setup([FRESH_WORD_MS + 1], [], ['a', 'b', 'c']);
    expect(await slow.run(slow.word.afterLoad(U, 'c', 2, () => false))).toBe('keep');
    const fresh = setup([5], [], ['a', 'b', 'c']);
    expect(await fresh.run(fresh.word.afterLoad(U, 'c', 2, () => false))).toBe('undo');
  });

  it('after a load over the limit: asks again on a stale idle word while the adapter is still unrouted', async () => {
    // The fault run's longest (ii) stretches (run on a starved 2-core machine): the after-load
    // word took 692 ms to act on, the excess was kept, requests went to it, and the trim had to
    // wait 15 s for an idle adapter. Still `loading` in the store, it can wait for a fresh word.
    const { api, word, run } = setup([FRESH_WORD_MS + 1, FRESH_WORD_MS + 1, 5], [], ['a', 'b', 'c']);
    expect(await run(word.afterLoad(U, 'c', 2, () => false))).toBe('undo');
    expect(api.asked).toBe(3);
  });
});
