/**
 * Unit test of Outage (src/fleet/redis/outage.ts, one module), written against the survivors of
 * its mutation run (docs/reliability/mutation-testing.md): a node deciding alone never asks the
 * shared store, probes it every `probeMs` and no sooner, ends the outage only once the hand-back
 * took everything, and unloads nothing for two probe intervals after the shared store is back or
 * while a record change's old runtime still decides. The shared store is a fake answering `ping`;
 * the clock is virtual.
 */
import { VirtualClock } from '../../src/clock';
import type { Logger } from '../../src/log';
import { Outage, UNLOAD_HOLD_OFF_PROBES } from '../../src/fleet/redis/outage';
import type { SharedStore } from '../../src/fleet/redis/shared-store';

const PROBE = 1_000;
const LOG_EVERY = 10_000;

function setup(handBackAnswers: boolean[] = [], onHandBack: (o: Outage) => void = () => undefined) {
  const clock = new VirtualClock();
  const lines: string[] = [];
  const log: Logger = {
    info: (m) => lines.push(`info ${m}`),
    warn: (m) => lines.push(`warn ${m}`),
    error: (m) => lines.push(`error ${m}`),
  };
  const up = { value: false };
  let pings = 0;
  let remoteChanges = 0;
  const shared = {
    ping: async () => {
      pings++;
      if (!up.value) throw new Error('down');
      return 'PONG';
    },
    onRemoteChange: () => void remoteChanges++,
  } as unknown as SharedStore;
  let handBacks = 0;
  const outage = new Outage(shared, log, { probeMs: PROBE, logEveryMs: LOG_EVERY }, clock, async () => {
    handBacks++;
    onHandBack(outage);
    return handBackAnswers.shift() ?? true;
  });
  return {
    clock,
    lines,
    up,
    outage,
    pings: () => pings,
    handBacks: () => handBacks,
    remoteChanges: () => remoteChanges,
  };
}

describe('Outage.decide', () => {
  it('asks the shared store while it answers; a failure degrades and falls back; degraded, it is not asked', async () => {
    const { outage, lines } = setup();
    const asked: string[] = [];
    const ok = await outage.decide(
      async () => (asked.push('shared'), 1),
      async () => (asked.push('local'), 2),
    );
    expect(ok).toBe(1);
    expect(outage.degraded).toBe(false);
    const failed = await outage.decide(
      async () => {
        asked.push('shared');
        throw new Error('timeout');
      },
      async () => (asked.push('local'), 3),
    );
    expect(failed).toBe(3);
    expect(outage.degraded).toBe(true);
    expect(lines).toEqual([expect.stringMatching(/^error shared fleet state unavailable \(timeout\)/)]);
    const alone = await outage.decide(
      async () => (asked.push('shared'), 4),
      async () => (asked.push('local'), 5),
    );
    expect(alone).toBe(5);
    expect(asked).toEqual(['shared', 'shared', 'local', 'local']);
  });
});

describe('Outage probes', () => {
  it('probes every probeMs after the last probe ended, never sooner, while the store stays down', async () => {
    const { clock, outage, pings } = setup();
    outage.degrade(new Error('down'));
    outage.degrade(new Error('again')); // degraded already: no second probe chain
    await clock.run(PROBE - 1);
    expect(pings()).toBe(0);
    await clock.run(PROBE);
    expect(pings()).toBe(1);
    await clock.run(5 * PROBE);
    expect(pings()).toBe(5);
    expect(outage.degraded).toBe(true);
    expect(clock.pending()).toBe(1);
    outage.close();
  });

  it('logs "still unavailable" at most every logEveryMs, counted from the outage start', async () => {
    const { clock, outage, lines } = setup();
    await clock.run(3_000);
    outage.degrade(new Error('down'));
    await clock.run(3_000 + LOG_EVERY - 1);
    expect(lines.filter((l) => l.startsWith('warn'))).toEqual([]);
    await clock.run(3_000 + LOG_EVERY);
    // The first one at exactly logEveryMs, with the outage's own age.
    expect(lines.filter((l) => l.startsWith('warn'))).toEqual([
      'warn shared fleet state still unavailable after 10 s: down',
    ]);
    await clock.run(3_000 + 2 * LOG_EVERY - 1);
    expect(lines.filter((l) => l.startsWith('warn'))).toHaveLength(1);
    await clock.run(3_000 + 2 * LOG_EVERY);
    expect(lines.filter((l) => l.startsWith('warn'))).toHaveLength(2);
    outage.close();
  });

  it('stays degraded while the hand-back is refused, and probes again; ends once it is taken', async () => {
    const { clock, outage, up, handBacks, remoteChanges, lines } = setup([false, false, true]);
    outage.degrade(new Error('down'));
    up.value = true;
    await clock.run(PROBE);
    expect(handBacks()).toBe(1);
    expect(outage.degraded).toBe(true);
    expect(remoteChanges()).toBe(0);
    await clock.run(2 * PROBE);
    expect(outage.degraded).toBe(true);
    await clock.run(3 * PROBE);
    expect(handBacks()).toBe(3);
    expect(outage.degraded).toBe(false);
    // Waiters on the shared store's room are woken, and no probe is left armed.
    expect(remoteChanges()).toBe(1);
    expect(clock.pending()).toBe(0);
    expect(lines.at(-1)).toBe('info shared fleet state is back after 3 s: decisions are shared again');
  });

  it('a store whose ping fails is never handed back to', async () => {
    const { clock, outage, handBacks } = setup();
    outage.degrade(new Error('down'));
    await clock.run(3 * PROBE);
    expect(handBacks()).toBe(0);
    outage.close();
  });

  it('stopProbing and close cancel the next probe; degraded once closed, it never probes nor logs', async () => {
    const a = setup();
    a.outage.degrade(new Error('down'));
    a.outage.stopProbing();
    await a.clock.run(5 * PROBE);
    expect(a.pings()).toBe(0);

    const b = setup();
    b.outage.degrade(new Error('down'));
    expect(b.outage.closed).toBe(false);
    b.outage.close();
    expect(b.outage.closed).toBe(true);
    await b.clock.run(5 * PROBE);
    expect(b.pings()).toBe(0);

    const c = setup();
    c.outage.close();
    c.outage.degrade(new Error('down'));
    expect(c.outage.degraded).toBe(true);
    expect(c.clock.pending()).toBe(0);
    expect(c.lines).toEqual([]);
  });

  it('a probe stopped while it runs is not scheduled again', async () => {
    // Stopped (a runtime leaving this state) while its hand-back runs.
    const { clock, outage, up, pings } = setup([false], (o) => o.stopProbing());
    outage.degrade(new Error('down'));
    up.value = true;
    await clock.run(5 * PROBE);
    expect(outage.degraded).toBe(true);
    expect(pings()).toBe(1);
  });
});

/** Held off until `from` plus two probe intervals, not a millisecond more. */
async function heldOffTwoProbesFrom(clock: VirtualClock, outage: Outage, from: number) {
  expect(outage.unloadHeldOff()).toBe(true);
  await clock.run(from + UNLOAD_HOLD_OFF_PROBES * PROBE - 1);
  expect(outage.unloadHeldOff()).toBe(true);
  await clock.run(from + UNLOAD_HOLD_OFF_PROBES * PROBE);
  expect(outage.unloadHeldOff()).toBe(false);
}

describe('Outage.unloadHeldOff', () => {
  it('false when the shared store was never lost', async () => {
    const { clock, outage } = setup();
    expect(outage.unloadHeldOff()).toBe(false);
    await clock.run(60_000);
    expect(outage.unloadHeldOff()).toBe(false);
  });

  it('held off for exactly two probe intervals after the shared store came back', async () => {
    const { clock, outage, up } = setup();
    outage.degrade(new Error('down'));
    up.value = true;
    await clock.run(PROBE); // back at 1 s
    expect(outage.degraded).toBe(false);
    await heldOffTwoProbesFrom(clock, outage, PROBE);
  });

  it("held off while a record change's old runtime decides, however long, and two probe intervals after", async () => {
    const { clock, outage } = setup();
    let decidedA!: () => void;
    let decidedB!: () => void;
    const a = outage.receiving(new Promise<void>((r) => (decidedA = r)));
    const b = outage.receiving(new Promise<void>((r) => (decidedB = r)));
    await clock.run(60_000);
    expect(outage.unloadHeldOff()).toBe(true);
    decidedA();
    await a;
    await clock.run(60_000 + 10 * PROBE);
    // One of the two changes still decides.
    expect(outage.unloadHeldOff()).toBe(true);
    decidedB();
    await b;
    await heldOffTwoProbesFrom(clock, outage, clock.now());
  });

  it('a record change whose decisions end in failure lifts the hold the same way', async () => {
    const { clock, outage } = setup();
    let fail!: (e: Error) => void;
    const decided = new Promise<void>((_, reject) => (fail = reject));
    decided.catch(() => undefined); // seen by receiving; not an unhandled rejection if it is not
    const p = outage.receiving(decided);
    await clock.run(1_000);
    expect(outage.unloadHeldOff()).toBe(true);
    await clock.run(5_000);
    fail(new Error('gone'));
    await expect(p).rejects.toThrow('gone');
    await heldOffTwoProbesFrom(clock, outage, 5_000);
  });
});
