/**
 * Review of the unseen hold after stop 64 (src/adapters/replica-word.ts, unseen-busy.ts): its 2 s
 * are a duration, which held on the wall clock (`now`) while its excuse is dated on the monotonic
 * one, and its holds were an Lru of 1024 pairs, which dropped a live hold once more pairs were
 * read busy within 2 s (a store just emptied, a fleet of 65 replicas running 16 adapters each).
 * Either let an unload out within the hold under a router this node cannot see. Real parts: the
 * runtime's own judge of a poll's reading (`poller.onReading`, in-process store) and its replica
 * word before an unload (`idleNow`), on a clock whose `now` a skew steps and whose monotonic
 * time line it does not (as the simulation's NodeClock).
 */
import type { ReplicaApi } from '../../src/backends/replica-api';
import { UNSEEN_HOLD_MS } from '../../src/adapters/replica-word';
import { silentLogger } from '../../src/log';
import { FleetRuntime } from '../../src/runtime';
import { busyReading } from '../helpers/unseen-hold';
import { SteppedClock } from './helpers';

const U = 'http://10.0.0.1:8000';

/** A replica that reports every adapter idle now, at once. */
const idleReplica = { activity: async () => ({ busy: [] as string[] }) } as unknown as ReplicaApi;

let rt: FleetRuntime;
afterEach(() => rt.stop());

/** A runtime on `clock` whose replicas `urls` are registered, none of their adapters leased. */
async function runtime(clock: SteppedClock, urls: string[]): Promise<FleetRuntime> {
  rt = new FleetRuntime({ log: silentLogger, clock, api: idleReplica });
  for (const url of urls) await rt.store.upsertReplica({ url, backend: 'vllm', priority: 0 });
  return rt;
}

describe('the unseen hold lasts its 2 s of the node’s own time, whatever its wall clock does', () => {
  it('a wall clock stepped ahead 600 ms does not end it 600 ms early', async () => {
    const clock = new SteppedClock(10_000);
    await runtime(clock, [U]);
    await rt.poller.onReading!(U, busyReading(['c']), clock.monotonic());
    clock.skew = 600;
    clock.t += 1500;
    expect(await rt.manager.replicaWord.idleNow(U, 'c', new Set())).toBe('busy');
  });

  it('a wall clock stepped back 2.5 s does not end it at once', async () => {
    const clock = new SteppedClock(10_000);
    await runtime(clock, [U]);
    await rt.poller.onReading!(U, busyReading(['c']), clock.monotonic());
    clock.skew = -2500;
    clock.t += 500;
    expect(await rt.manager.replicaWord.idleNow(U, 'c', new Set())).toBe('busy');
  });

  it('ends 2 s after the reading however the wall clock was stepped (never held for good)', async () => {
    const clock = new SteppedClock(10_000);
    await runtime(clock, [U]);
    await rt.poller.onReading!(U, busyReading(['c']), clock.monotonic());
    clock.skew = -5000;
    clock.t += UNSEEN_HOLD_MS;
    expect(await rt.manager.replicaWord.idleNow(U, 'c', new Set())).toBeUndefined();
  });
});

describe('no bound drops a hold within its 2 s', () => {
  const urls = Array.from({ length: 65 }, (_, i) => `http://10.0.1.${i}:8000`);
  const adapters = Array.from({ length: 16 }, (_, i) => `a${i}`);

  it('the first of 1,040 pairs read busy in one round is still held 100 ms later', async () => {
    const clock = new SteppedClock(10_000);
    await runtime(clock, urls);
    for (const url of urls) await rt.poller.onReading!(url, busyReading(adapters), clock.monotonic());
    clock.t += 100;
    expect(await rt.manager.replicaWord.idleNow(urls[0]!, 'a0', new Set())).toBe('busy');
  });

  it('keeps only holds within their 2 s: those past it go as new ones start', async () => {
    const clock = new SteppedClock(10_000);
    await runtime(clock, urls);
    for (const url of urls) await rt.poller.onReading!(url, busyReading(adapters), clock.monotonic());
    clock.t += UNSEEN_HOLD_MS;
    await rt.poller.onReading!(U, busyReading(['c']), clock.monotonic());
    expect(rt.manager.replicaWord.unseenHeld()).toBe(1);
  });
});

describe('the idle word’s age is measured on the node’s own time, whatever its wall clock does', () => {
  it('a word that took 400 ms is not fresh because the wall clock stepped back 300 ms meanwhile', async () => {
    const clock = new SteppedClock(10_000);
    let asks = 0;
    // Each answer takes 400 ms (FRESH_WORD_MS is 150); a skew correction steps `now` back during the first.
    const slow = {
      activity: async () => {
        clock.t += 400;
        if (asks++ === 0) clock.skew -= 300;
        return { busy: [] as string[] };
      },
    } as unknown as ReplicaApi;
    rt = new FleetRuntime({ log: silentLogger, clock, api: slow });
    await rt.store.upsertReplica({ url: U, backend: 'vllm', priority: 0 });
    expect(await rt.manager.replicaWord.idleNow(U, 'c', new Set())).toBe('stale');
  });
});
