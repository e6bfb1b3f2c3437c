/**
 * Unit test of SeenDown (src/fleet/redis/seen-down.ts, one module), written against the survivors
 * of its mutation run (docs/reliability/mutation-testing.md): what a node that decided alone hands
 * the shared store about the replicas it saw down, each dated on the shared clock no later than
 * the truth (the shared clock now, less the local time since the down poll began, less the skew
 * margin) and no earlier than the shared start of this node's last poll that began no later.
 */
import type { Clock } from '../../src/clock';
import type { MemoryFleetStore } from '../../src/fleet/memory-store';
import { SeenDown } from '../../src/fleet/redis/seen-down';
import { SKEW_MARGIN_MS } from '../../src/fleet/redis/scripts/prelude';
import type { SharedStore } from '../../src/fleet/redis/shared-store';
import type { ReplicaSnapshot } from '../../src/fleet/types';

const A = 'http://a:8000';
const B = 'http://b:8000';
const SHARED_NOW = 100_000;
const LOCAL_NOW = 1_500;

function setup(
  down: { url: string; snapshot: ReplicaSnapshot }[],
  withTime = true,
  up: { url: string; snapshot: ReplicaSnapshot }[] = [],
  clock: Clock = { now: () => LOCAL_NOW, after: () => () => undefined },
) {
  const applied: [string, ReplicaSnapshot][] = [];
  let timeReads = 0;
  const shared = {
    ...(withTime ? { sharedTime: async () => (timeReads++, SHARED_NOW) } : {}),
    applySnapshot: async (url: string, s: ReplicaSnapshot) => void applied.push([url, s]),
  } as unknown as SharedStore;
  const local = { seenDown: () => down, seenUp: () => up } as unknown as MemoryFleetStore;
  const seen = new SeenDown();
  return {
    seen,
    applied,
    timeReads: () => timeReads,
    push: (ups = true) => seen.push(local, shared, clock, ups),
  };
}

const downSince = (startedAt: number | undefined): ReplicaSnapshot => ({
  at: LOCAL_NOW,
  ...(startedAt === undefined ? {} : { startedAt }),
  ok: false,
  error: 'connect',
});
const truth = (began: number) => SHARED_NOW - (LOCAL_NOW - began) - SKEW_MARGIN_MS;

describe('SeenDown', () => {
  it('sends nothing, and reads no shared time, when no replica is down', async () => {
    const s = setup([]);
    await s.push();
    expect(s.applied).toEqual([]);
    expect(s.timeReads()).toBe(0);
  });

  it('hands on the replicas polled up too, dated alike (dst seed 503368)', async () => {
    const up: ReplicaSnapshot = { at: LOCAL_NOW, startedAt: 1_100, ok: true, verdictOnly: true };
    const s = setup([{ url: A, snapshot: downSince(1_000) }], true, [{ url: B, snapshot: up }]);
    await s.push();
    expect(s.applied).toEqual([
      [A, { ...downSince(1_000), sharedStartedAt: truth(1_000) }],
      [B, { ...up, sharedStartedAt: truth(1_100) }],
    ]);
  });

  it('after an emptied state (no outage), hands on the replicas polled down only', async () => {
    const up: ReplicaSnapshot = { at: LOCAL_NOW, startedAt: 1_100, ok: true, verdictOnly: true };
    const s = setup([{ url: A, snapshot: downSince(1_000) }], true, [{ url: B, snapshot: up }]);
    await s.push(false);
    expect(s.applied).toEqual([[A, { ...downSince(1_000), sharedStartedAt: truth(1_000) }]]);
  });

  it('dates each down poll on the shared clock, never later than the truth', async () => {
    const s = setup([
      { url: A, snapshot: downSince(1_000) },
      { url: B, snapshot: downSince(1_200) },
    ]);
    await s.push();
    expect(s.applied).toEqual([
      [A, { ...downSince(1_000), sharedStartedAt: truth(1_000) }],
      [B, { ...downSince(1_200), sharedStartedAt: truth(1_200) }],
    ]);
  });

  it('leaves it undated with no shared clock, no start, or a start not finite', async () => {
    for (const [down, withTime] of [
      [downSince(1_000), false],
      [downSince(undefined), true],
      [downSince(Infinity), true],
      [downSince(NaN), true],
    ] as const) {
      const s = setup([{ url: A, snapshot: down }], withTime);
      await s.push();
      expect(s.applied).toHaveLength(1);
      expect(s.applied[0]![1].sharedStartedAt).toBeUndefined();
    }
  });

  it('never dates it before the shared start of this node’s last poll there that began no later', async () => {
    const s = setup([
      { url: A, snapshot: downSince(1_000) },
      { url: B, snapshot: downSince(1_000) },
    ]);
    s.seen.note(A, { at: 900, startedAt: 1_000, sharedStartedAt: truth(1_000) + 300, ok: true });
    s.seen.note(B, { at: 900, startedAt: 1_001, sharedStartedAt: truth(1_000) + 300, ok: true });
    await s.push();
    expect(s.applied.map(([u, x]) => [u, x.sharedStartedAt])).toEqual([
      [A, truth(1_000) + 300],
      [B, truth(1_000)],
    ]);
  });

  it('keeps the newest poll per replica (by its local start, else its time), ignoring undated ones', async () => {
    const s = setup([{ url: A, snapshot: downSince(1_000) }]);
    s.seen.note(A, { at: 800, sharedStartedAt: truth(1_000) + 100, ok: true });
    s.seen.note(A, { at: 700, sharedStartedAt: truth(1_000) + 900, ok: true }); // older: ignored
    s.seen.note(A, { at: 950, ok: true }); // no shared start: ignored
    await s.push();
    expect(s.applied[0]![1].sharedStartedAt).toBe(truth(1_000) + 100);

    const t = setup([{ url: A, snapshot: downSince(1_000) }]);
    t.seen.note(A, { at: 5, startedAt: 800, sharedStartedAt: truth(1_000) + 100, ok: true });
    t.seen.note(A, { at: 5, startedAt: 800, sharedStartedAt: truth(1_000) + 200, ok: true }); // as new: taken
    await t.push();
    expect(t.applied[0]![1].sharedStartedAt).toBe(truth(1_000) + 200);
  });

  it('orders the down poll after this node’s last dated poll on the monotonic clock: a wall clock stepped back between moves nothing', async () => {
    // The up poll began at 1,000 on both clocks (Redis held it from truth(1,000) + 300); the wall
    // clock was then stepped back 400 ms, and the down poll began at 1,100 monotonic, 700 on the
    // wall. Ordered on the wall, the down poll read as begun before the up one: not floored by its
    // shared start, dated before it, and the shared store kept the up verdict.
    const clock: Clock = {
      now: () => LOCAL_NOW - 400,
      monotonic: () => LOCAL_NOW,
      after: () => () => undefined,
    };
    const down = { ...downSince(700), monoStartedAt: 1_100 };
    const s = setup([{ url: A, snapshot: down }], true, [], clock);
    s.seen.note(A, {
      at: 1_050,
      startedAt: 1_000,
      monoStartedAt: 1_000,
      sharedStartedAt: truth(1_000) + 300,
      ok: true,
    });
    await s.push();
    expect(s.applied[0]![1].sharedStartedAt).toBe(truth(1_000) + 300);
  });

  it('measures the time since the down poll began on the monotonic clock: a wall clock stepped since moves nothing', async () => {
    // The down poll began at 1,000 on both clocks, 500 ms ago by the monotonic clock; the wall
    // clock was stepped since (a skew correction during the outage). Back 400 ms, a wall-clock
    // duration dated the poll 400 ms late (it overwrote a newer poll); forward, 400 ms early (it
    // lost to this node's own up poll before it).
    for (const step of [-400, 400]) {
      const clock: Clock = {
        now: () => LOCAL_NOW + step,
        monotonic: () => LOCAL_NOW,
        after: () => () => undefined,
      };
      const s = setup([{ url: A, snapshot: { ...downSince(1_000), monoStartedAt: 1_000 } }], true, [], clock);
      await s.push();
      expect(s.applied[0]![1].sharedStartedAt).toBe(truth(1_000));
    }
  });
});
