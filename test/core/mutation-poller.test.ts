/**
 * The poller (src/fleet/poller.ts) alone, on a virtual clock and the in-process store: what each
 * poll writes (the snapshot's times and fields, the replica's load and context length), who is
 * told (poll, expiry and round listeners, the reading's judge, the preflight once), the timeout
 * count a refused poll clears, and refreshes that join or start afresh.
 */
import { BackendError } from '../../src/backends/errors';
import type { LoadOutcome, ReplicaApi, Scrape, UnloadOutcome } from '../../src/backends/replica-api';
import { sleep, VirtualClock } from '../../src/clock';
import type { ReplicaCheck } from '../../src/doctor/check';
import { replicaLines } from '../../src/doctor/report';
import { MemoryFleetStore } from '../../src/fleet/memory-store';
import { Poller } from '../../src/fleet/poller';
import type { ReplicaSnapshot, ReplicaSpec } from '../../src/fleet/types';
import { seededRandom } from '../../src/random';

const U = 'http://r1:1';
const SPEC: ReplicaSpec = { url: U, backend: 'vllm', priority: 0 };
const LOAD = { waiting: 1, running: 2, kvUsage: 0.5, activeAdapters: [], malformedLines: 0 };

class Api implements ReplicaApi {
  scrapes: { at: number; timeoutMs: number }[] = [];
  fail: false | 'refused' | 'timeout' = false;
  maxModelLen: number | undefined = 4096;
  load: Scrape['load'] = LOAD;
  constructor(
    private clock: VirtualClock,
    public ms: number,
  ) {}
  async scrape(_r: ReplicaSpec, timeoutMs: number): Promise<Scrape> {
    this.scrapes.push({ at: this.clock.now(), timeoutMs });
    await sleep(this.clock, this.ms);
    if (this.fail === 'refused') throw new BackendError('connect', 'ECONNREFUSED');
    if (this.fail === 'timeout') throw new BackendError('timeout', 'no answer within 1000 ms');
    return {
      load: this.load,
      registry: [{ name: 'a', path: '/a' }],
      llamaAdapters: [{ id: 0, path: '/a' }],
      maxModelLen: this.maxModelLen,
    };
  }
  async loadAdapter(): Promise<LoadOutcome> {
    return 'loaded';
  }
  async unloadAdapter(): Promise<UnloadOutcome> {
    return 'unloaded';
  }
}

/** The in-process store, recording every snapshot and answering a shared time. */
class Store extends MemoryFleetStore {
  snapshots: ReplicaSnapshot[] = [];
  shared: (() => Promise<number | undefined>) | undefined = undefined;
  override async applySnapshot(url: string, s: ReplicaSnapshot): Promise<void> {
    this.snapshots.push(s);
    return super.applySnapshot(url, s);
  }
  sharedTime(): Promise<number | undefined> {
    return this.shared ? this.shared() : Promise.resolve(undefined);
  }
}

function logger() {
  return { info: jest.fn(), warn: jest.fn(), error: jest.fn() };
}

async function setup(scrapeMs = 50, options = {}) {
  const clock = new VirtualClock();
  const store = new Store();
  await store.upsertReplica(SPEC);
  const api = new Api(clock, scrapeMs);
  const log = logger();
  const poller = new Poller(
    store,
    api,
    clock,
    { intervalMs: 100, timeoutMs: 1000, jitter: 0.1, leaseMaxAgeMs: 1000, ...options },
    seededRandom(1),
    log,
  );
  const poll = async () => {
    const p = poller.refresh(SPEC);
    await clock.run();
    await p;
  };
  return { clock, store, api, poller, log, poll };
}

describe('a poll', () => {
  it('writes the reading with its times: started, ended, and the shared clock at its start', async () => {
    const { clock, store, poller, poll } = await setup(50);
    store.shared = async () => 777;
    poller.isManaged = (name) => name === 'a';
    poller.managedVersion = 3;
    await clock.run(10);
    await poll();
    const s = store.snapshots[0]!;
    expect(s).toMatchObject({
      at: 60,
      startedAt: 10,
      sharedStartedAt: 777,
      ok: true,
      load: LOAD,
      registry: [{ name: 'a', path: '/a' }],
      managedVersion: 3,
      llamaAdapters: [{ id: 0, path: '/a' }],
    });
    expect(s.managed).toBe(poller.isManaged);
    expect(poller.lastLoad.get(U)).toBe(LOAD);
    expect(poller.maxModelLen.get(U)).toBe(4096);
  });

  it('writes no managed test when none is set, and no shared time when reading it fails', async () => {
    const { store, poll } = await setup();
    store.shared = () => Promise.reject(new Error('down'));
    await poll();
    expect(store.snapshots[0]!.managed).toBeUndefined();
    expect(store.snapshots[0]!.sharedStartedAt).toBeUndefined();
    expect(store.snapshots[0]!.ok).toBe(true);
  });

  it('dates no shared start when the shared clock answers none (a node deciding alone)', async () => {
    // The failover store answers none while cut off from Redis. SeenDown (seen-down.ts) keeps
    // each poll's shared start unless undefined and dates the down verdicts it hands on after the
    // outage from it: from a NaN, the snapshot script dates one about the push's time, after the up
    // polls other nodes made since.
    const { store, poll } = await setup();
    store.shared = async () => undefined;
    await poll();
    expect(store.snapshots[0]!.sharedStartedAt).toBeUndefined();
    expect(store.snapshots[0]!.ok).toBe(true);
  });

  it('forgets a context length the replica no longer reports', async () => {
    const { api, poller, poll } = await setup();
    await poll();
    expect(poller.maxModelLen.get(U)).toBe(4096);
    api.maxModelLen = undefined;
    await poll();
    expect(poller.maxModelLen.has(U)).toBe(false);
  });

  it('a failed poll writes the replica down with the error and its times', async () => {
    const { clock, store, api, poller, poll } = await setup(30);
    store.shared = async () => 5;
    api.fail = 'refused';
    await clock.run(7);
    await poll();
    expect(store.snapshots[0]).toEqual({
      at: 37,
      startedAt: 7,
      sharedStartedAt: 5,
      // A clock without a monotonic reading: its `now`.
      monoStartedAt: 7,
      monoAt: 37,
      ok: false,
      error: 'ECONNREFUSED',
    });
    expect(poller.stats).toEqual({ polls: 1, errors: 1, leasesExpired: 0 });
  });

  it('scrapes with the configured timeout, and configure changes it', async () => {
    const { api, poller, poll } = await setup();
    await poll();
    poller.configure({ timeoutMs: 333 });
    await poll();
    expect(api.scrapes.map((s) => s.timeoutMs)).toEqual([1000, 333]);
    expect([poller.intervalMs, poller.timeoutMs, poller.leaseMaxAgeMs]).toEqual([100, 333, 1000]);
  });

  it('tells every poll listener the outcome and its time, a timeout given the benefit of the doubt too', async () => {
    const { clock, api, poller, log, poll } = await setup(40);
    await clock.run(25); // times are from each poll's start, not from 0
    const a: unknown[] = [];
    const b: unknown[] = [];
    poller.addPollListener((...args) => a.push(args));
    poller.addPollListener((...args) => b.push(args));
    await poll();
    api.fail = 'timeout';
    await poll();
    api.fail = 'refused';
    await poll();
    expect(a).toEqual([
      [U, true, 40],
      [U, false, 40],
      [U, false, 40],
    ]);
    expect(b).toEqual(a);
    expect(log.warn).toHaveBeenCalledWith(
      `poll of ${U} timed out; it stays up until the next poll: no answer within 1000 ms`,
    );
  });

  it('a refused poll clears the timeout count: the next timeout is the first again', async () => {
    const { store, api, poll } = await setup();
    await poll();
    api.fail = 'timeout';
    await poll(); // the first: no snapshot
    api.fail = 'refused';
    await poll(); // down at once
    api.fail = 'timeout';
    await poll(); // the first again since the refusal: no snapshot
    expect(store.snapshots.map((s) => s.error ?? 'ok')).toEqual(['ok', 'ECONNREFUSED']);
    await poll(); // the second in a row
    expect(store.snapshots.map((s) => s.error ?? 'ok')).toEqual([
      'ok',
      'ECONNREFUSED',
      'no answer within 1000 ms',
    ]);
  });

  it('judges the reading before telling the poll listeners, and a failed judgment is only logged', async () => {
    const { clock, poller, log, poll } = await setup(20);
    const order: string[] = [];
    poller.onReading = async (url, load, startedAt) => {
      order.push(`reading ${url} ${load.waiting} ${startedAt}`);
      await sleep(clock, 5);
      order.push('judged');
    };
    poller.addPollListener((_u, ok) => order.push(`listener ${ok}`));
    await poll();
    expect(order).toEqual([`reading ${U} 1 0`, 'judged', 'listener true']);
    poller.onReading = () => Promise.reject(new Error('no store'));
    await poll();
    expect(order.at(-1)).toBe('listener true');
    expect(log.warn).toHaveBeenCalledWith(`could not judge the reading of ${U}: no store`);
  });
});

describe('the preflight', () => {
  const check = (fit: boolean): ReplicaCheck => ({
    url: U,
    backend: 'vllm',
    version: '0.9',
    reachable: true,
    signals: [],
    findings: [{ level: 'warn', text: 'one finding' }],
    fit,
  });

  it('runs once per replica, kept for the status page, logged as info when fit', async () => {
    const { poller, log, poll } = await setup();
    const preflight = jest.fn(async () => check(true));
    poller.preflight = preflight;
    await poll();
    await poll();
    expect(preflight).toHaveBeenCalledTimes(1);
    expect(preflight).toHaveBeenCalledWith(SPEC);
    expect(poller.preflightChecks.get(U)).toEqual(check(true));
    expect(log.info).toHaveBeenCalledTimes(1);
    expect(log.info).toHaveBeenCalledWith(`preflight of replica ${replicaLines(check(true)).join('\n')}`);
    expect(log.info.mock.calls[0][0]).toMatch(/^preflight of replica http:\/\/r1:1: fit/);
    expect(log.warn).not.toHaveBeenCalled();
  });

  it('warns when unfit, and when it fails', async () => {
    const { poller, log, poll } = await setup();
    poller.preflight = async () => check(false);
    await poll();
    expect(log.warn.mock.calls[0][0]).toMatch(/^preflight of replica http:\/\/r1:1: UNFIT/);
    const other = await setup();
    other.poller.preflight = () => Promise.reject(new Error('boom'));
    await other.poll();
    expect(other.log.warn).toHaveBeenCalledWith(`preflight of replica ${U} failed: boom`);
    expect(other.poller.preflightChecks.size).toBe(0);
  });
});

describe('rounds', () => {
  it('tells round listeners after each timed round, expiry listeners only when leases were reclaimed', async () => {
    const { clock, store, poller, log, api } = await setup(1, { leaseMaxAgeMs: 150 });
    // An idle replica: one running or queueing requests renews base-model leases (dst seed 834440).
    api.load = { ...LOAD, waiting: 0, running: 0 };
    const rounds: number[] = [];
    const expired: number[] = [];
    poller.addRoundListener(() => rounds.push(clock.now()));
    poller.addRoundListener(() => rounds.push(-1));
    poller.addExpiryListener((n) => expired.push(n));
    poller.addExpiryListener((n) => expired.push(-n));
    await store.acquire({ id: 'lost', url: U, adapter: null, at: 0 });
    await store.acquire({ id: 'lost2', url: U, adapter: 'a', at: 0 });
    expect(poller.running).toBe(false);
    poller.stop(); // not running: nothing to cancel
    poller.start();
    poller.start(); // no second schedule
    expect(poller.running).toBe(true);
    await clock.run(450);
    poller.stop();
    expect(poller.running).toBe(false);
    await clock.run();
    // About four rounds at 100 ms ± 10%, each told to both listeners.
    expect(rounds.filter((t) => t === -1).length).toBe(4);
    expect(rounds.filter((t) => t !== -1).length).toBe(4);
    expect(expired).toEqual([2, -2]);
    expect(poller.stats.leasesExpired).toBe(2);
    expect(log.warn).toHaveBeenCalledWith(
      `reclaimed in-flight lease lost (base on ${U}): its log phase never came (held over 150 ms, or its Kong node stopped)`,
    );
    expect(log.warn).toHaveBeenCalledWith(expect.stringMatching(/^reclaimed in-flight lease lost2 \(a on /));
  });

  it('a round that fails is logged, and the rounds go on', async () => {
    const { clock, store, poller, log, api } = await setup(1);
    let fail = true;
    const specs = store.replicaSpecs.bind(store);
    store.replicaSpecs = () => (fail ? Promise.reject(new Error('store down')) : specs());
    poller.start();
    await clock.run(150);
    expect(log.error).toHaveBeenCalledWith('poll round failed: store down');
    fail = false;
    await clock.run(350);
    poller.stop();
    expect(api.scrapes.length).toBeGreaterThan(0);
  });

  it('a round stopped before its timer fires polls nothing', async () => {
    const { clock, poller, api } = await setup(1);
    poller.start();
    poller.stop();
    await clock.run(1000);
    expect(api.scrapes).toEqual([]);
  });

  it('a round skips a replica whose poll is still running, without waiting for it', async () => {
    const { clock, poller, api } = await setup(300);
    const slow = poller.refresh(SPEC);
    let done = false;
    const round = poller.pollAll().then(() => (done = true));
    await clock.run(10);
    expect(done).toBe(true);
    expect(api.scrapes.length).toBe(1);
    await clock.run();
    await Promise.all([slow, round]);
  });
});

describe('refreshes', () => {
  it('refreshAfresh waits out a poll under way, then polls again', async () => {
    const { clock, poller, api } = await setup(50);
    const first = poller.refresh(SPEC);
    const again = poller.refreshAfresh(SPEC);
    const joined = poller.refresh(SPEC);
    expect(joined).toBe(first);
    await clock.run();
    await Promise.all([first, again]);
    expect(api.scrapes.map((s) => s.at)).toEqual([0, 50]);
  });

  it('refreshUrl polls the replica registered there, afresh when asked, and nothing for an unknown URL', async () => {
    const { clock, poller, api } = await setup(50);
    const unknown = poller.refreshUrl('http://nowhere:1');
    await clock.run();
    await unknown;
    expect(api.scrapes.length).toBe(0);
    const running = poller.refresh(SPEC);
    const joined = poller.refreshUrl(U);
    await clock.run();
    await Promise.all([running, joined]);
    expect(api.scrapes.map((s) => s.at)).toEqual([0]);
    const running2 = poller.refresh(SPEC);
    const afresh = poller.refreshUrl(U, true);
    await clock.run();
    await Promise.all([running2, afresh]);
    expect(api.scrapes.map((s) => s.at)).toEqual([0, 50, 100]);
  });
});
