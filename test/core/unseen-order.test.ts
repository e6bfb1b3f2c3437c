/**
 * A poll's busy reading is excused by a lease only if that lease was taken before the poll began
 * (src/adapters/unseen-busy.ts): one taken after the replica may have written its reading (during
 * the judge's store round trips, or between the scrape and the judge) cannot be what it read, and
 * excused a reading that may have been a request of a router this node cannot see. Once that
 * lease ended no hold stood, and an unload could go out under that router's next request (an
 * adversarial read after review 65). Real parts: the runtime's own judge of a poll's reading
 * (`poller.onReading`) and its replica word before an unload (`idleNow`), on the in-process store
 * and on a real redis-server (the leases' take times on Redis's clock).
 */
import type { ReplicaApi } from '../../src/backends/replica-api';
import { monotonic, type Clock } from '../../src/clock';
import { UNSEEN_HOLD_MS } from '../../src/adapters/replica-word';
import { silentLogger } from '../../src/log';
import { LeaseHandle } from '../../src/lease';
import { releaseLease } from '../../src/router/log-phase';
import { FleetRuntime } from '../../src/runtime';
import { RedisServer } from '../../harness/redis/server';
import { waitFor } from '../../harness/wait';
import { busyReading } from '../helpers/unseen-hold';

const U = 'http://10.0.0.1:8000';

/** Time set by hand, `now` and `monotonic` alike. */
class HandClock implements Clock {
  t = 10_000;
  now(): number {
    return this.t;
  }
  monotonic(): number {
    return this.t;
  }
  after(): () => void {
    return () => undefined;
  }
}

/** A replica that reports every adapter idle now, at once. */
const idleReplica = { activity: async () => ({ busy: [] as string[] }) } as unknown as ReplicaApi;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** `c` loaded on U 10 s ago: a resident whose leases the judge reads. */
async function residentC(rt: FleetRuntime): Promise<void> {
  await rt.store.upsertReplica({ url: U, backend: 'vllm', priority: 0 });
  const before = rt.clock.now() - 10_000;
  const f = await rt.store.beginLoad(U, 'c', before, 10, 10_000);
  expect(await rt.store.finishLoad(U, 'c', f!, true, before + 1)).toBe(true);
}

describe('in process: only a lease taken before the poll began excuses its reading', () => {
  let rt: FleetRuntime;
  let clock: HandClock;
  beforeEach(async () => {
    clock = new HandClock();
    rt = new FleetRuntime({ log: silentLogger, clock, api: idleReplica });
    await residentC(rt);
  });
  afterEach(() => rt.stop());

  /** A lease of this node on `c`, taken now. */
  const lease = (id: string) => rt.store.acquire({ id, url: U, adapter: 'c', at: clock.now() });

  it('a lease taken after the poll began excuses nothing: the adapter is held once it ended', async () => {
    const began = clock.monotonic();
    clock.t += 50;
    await lease('after');
    clock.t += 50;
    await rt.poller.onReading!(U, busyReading(['c']), began);
    await rt.store.release('after', clock.now(), 200);
    clock.t += 100;
    expect(await rt.manager.replicaWord.idleNow(U, 'c', new Set())).toBe('busy');
  });

  it('a lease taken when the poll began excuses its reading', async () => {
    const began = clock.monotonic();
    await lease('then');
    clock.t += 50;
    await rt.poller.onReading!(U, busyReading(['c']), began);
    await rt.store.release('then', clock.now(), 200);
    expect(rt.manager.replicaWord.unseenHeld()).toBe(0);
  });

  it('an older lease beside a newer one excuses the reading', async () => {
    await lease('older');
    clock.t += 100;
    const began = clock.monotonic();
    clock.t += 50;
    await lease('newer');
    clock.t += 50;
    await rt.poller.onReading!(U, busyReading(['c']), began);
    expect(rt.manager.replicaWord.unseenHeld()).toBe(0);
  });

  it('an adapter busy under this node’s leases only is unloadable once they ended and it reads idle', async () => {
    await lease('mine');
    clock.t += 100;
    await rt.poller.onReading!(U, busyReading(['c']), clock.monotonic());
    clock.t += 900;
    await rt.poller.onReading!(U, busyReading(['c']), clock.monotonic() - 50);
    await rt.store.release('mine', clock.now(), 200);
    clock.t += 10;
    expect(await rt.manager.replicaWord.idleNow(U, 'c', new Set())).toBeUndefined();
  });

  it('the hold a lease taken after the poll began no longer excuses ends 2 s after that reading', async () => {
    const began = clock.monotonic();
    clock.t += 50;
    await lease('after');
    await rt.poller.onReading!(U, busyReading(['c']), began);
    await rt.store.release('after', clock.now(), 200);
    clock.t += UNSEEN_HOLD_MS;
    expect(await rt.manager.replicaWord.idleNow(U, 'c', new Set())).toBeUndefined();
  });
});

describe('a request of this node that ended since the poll began: an excuse only if open when it began', () => {
  // Its log phase tells the replica word (`servedEnded`); a lease taken after the poll began and
  // given back before the judge read the store would otherwise excuse the reading by its end.
  let rt: FleetRuntime;
  let clock: HandClock;
  beforeEach(async () => {
    clock = new HandClock();
    rt = new FleetRuntime({ log: silentLogger, clock, api: idleReplica });
    await residentC(rt);
  });
  afterEach(() => rt.stop());

  /** A request of this node on `c`, served and ended through the log phase; whether the judge then held `c`. */
  async function servedThenJudged(openedBefore: boolean): Promise<boolean> {
    let began = clock.monotonic();
    clock.t += 50;
    const { lease } = await LeaseHandle.take(rt, U, 'c');
    if (openedBefore) began = clock.monotonic() + 10;
    clock.t += 50;
    await releaseLease(lease, 200);
    clock.t += 10;
    await rt.poller.onReading!(U, busyReading(['c']), began);
    return rt.manager.replicaWord.unseenHeld() > 0;
  }

  it('one opened after the poll began excuses nothing', async () => {
    expect(await servedThenJudged(false)).toBe(true);
  });

  it('one open when the poll began excuses the reading', async () => {
    expect(await servedThenJudged(true)).toBe(false);
  });
});

describe('a request counted in another store of this process: its lease excuses only if opened by then', () => {
  // A `redis` record change: the runtime polling now (m2) asks the one it replaced (m1, its own
  // in-process store) about the requests that one still drains (RuntimeDrain).
  let m1: FleetRuntime;
  let m2: FleetRuntime;
  let clock: HandClock;
  beforeEach(async () => {
    clock = new HandClock();
    m1 = new FleetRuntime({ log: silentLogger, clock, api: idleReplica });
    m2 = new FleetRuntime({ log: silentLogger, clock, api: idleReplica });
    await residentC(m1);
    await residentC(m2);
  });
  afterEach(() => {
    m1.stop();
    m2.stop();
  });

  /** Whether m2's judge held `c` read busy by a poll begun at `began`, with `taken` open on m1 meanwhile. */
  async function judged(taken: () => Promise<LeaseHandle>, began: number): Promise<boolean> {
    const lease = await taken();
    await m2.poller.onReading!(U, busyReading(['c']), began);
    await lease.release(200);
    return m2.manager.replicaWord.unseenHeld() > 0;
  }
  const onM1 = async () => (await LeaseHandle.take(m1, U, 'c')).lease;

  it('one opened after the poll began excuses nothing', async () => {
    const retired = m1.retire(m2);
    const began = clock.monotonic();
    clock.t += 50;
    expect(await judged(onM1, began)).toBe(true);
    await retired;
  });

  it('one opened before the poll began excuses the reading', async () => {
    const retired = m1.retire(m2);
    const lease = await onM1();
    clock.t += 50;
    expect(await judged(async () => lease, clock.monotonic())).toBe(false);
    await retired;
  });
});

describe('over Redis: a lease’s take time on Redis’s clock against the poll’s start', () => {
  let redis: RedisServer;
  let rt: FleetRuntime;
  let cases = 0;
  beforeAll(async () => {
    redis = await RedisServer.start();
  });
  afterAll(async () => {
    await redis.close();
  });
  beforeEach(async () => {
    rt = new FleetRuntime({
      log: silentLogger,
      api: idleReplica,
      redis: redis.config(`uo${++cases}:`, { timeout: 2000 }),
      poller: { intervalMs: 600_000, timeoutMs: 1000 },
    });
    rt.poller.stop();
    await waitFor(() => rt.store.mode?.() === 'redis', 5000, 'sharing state');
    await residentC(rt);
  });
  afterEach(async () => {
    rt.poller.stop();
    await rt.store.close?.();
  });

  const lease = (id: string) => rt.store.acquire({ id, url: U, adapter: 'c', at: rt.clock.now() });

  it('a lease taken after the poll began excuses nothing: the adapter is held once it ended', async () => {
    const began = monotonic(rt.clock);
    await lease('after');
    await rt.poller.onReading!(U, busyReading(['c']), began);
    await rt.store.release('after', rt.clock.now(), 200);
    expect(await rt.manager.replicaWord.idleNow(U, 'c', new Set())).toBe('busy');
  });

  it('dates the oldest open lease by Redis’s clock, never older than it is', async () => {
    const begun = monotonic(rt.clock);
    await lease('older');
    await sleep(30);
    await lease('newer');
    const c = (await rt.store.residents(U, rt.clock.now())).find((r) => r.name === 'c');
    const elapsed = monotonic(rt.clock) - begun;
    expect(c?.inFlight).toBe(2);
    expect(c?.leasedFor).toBeLessThanOrEqual(elapsed);
    // The older one's: 30 ms of sleep, less the 1 ms both times are floored to (and a timer's early ms).
    expect(c?.leasedFor).toBeGreaterThanOrEqual(27);
    expect((await rt.store.residents(U)).find((r) => r.name === 'c')?.leasedFor).toBeUndefined();
  });

  it('a lease taken before the poll began excuses its reading; idle once it ended, the adapter may go', async () => {
    await lease('before');
    // Longer than any reply's way back here: the excuse errs towards holding by that much.
    await sleep(200);
    await rt.poller.onReading!(U, busyReading(['c']), monotonic(rt.clock));
    await rt.store.release('before', rt.clock.now(), 200);
    expect(await rt.manager.replicaWord.idleNow(U, 'c', new Set())).toBeUndefined();
  });
});
