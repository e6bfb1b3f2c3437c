import { beladyMisses } from '../../bench/des/belady';
import type { Timeline } from '../../bench/des/class-misses';
import { anatomy, beladyMissFlags, bursts, type PlacedLoad } from '../../bench/des/load-anatomy';

/**
 * The load anatomy of the bursty workload's gap to the pooled bound (bench/des/load-anatomy.ts):
 * which requests Belady's minimum loads for, where the bursts are, and what a load's stall cost
 * the requests queued behind it.
 */
describe('load anatomy', () => {
  it("Belady's misses, request by request, are as many as beladyMisses counts, the first use of each adapter among them", () => {
    const seq = ['a', 'b', 'c', 'a', 'd', 'b', 'a', 'c', 'c', 'e', 'a', 'b'];
    for (const capacity of [1, 2, 3, 5]) {
      const flags = beladyMissFlags(seq, capacity);
      expect(flags.filter(Boolean).length).toBe(beladyMisses(seq, capacity));
      seq.forEach((a, i) => {
        if (seq.indexOf(a) === i) expect(flags[i]).toBe(true);
      });
    }
    // Two slots, a b c a b: c evicts b (used again later than a), so b loads again.
    expect(beladyMissFlags(['a', 'b', 'c', 'a', 'b'], 2)).toEqual([true, true, true, false, true]);
  });

  it('bursts split where no request came for the gap', () => {
    const at = [0, 100, 200, 5000, 5100, 20_000].map((t) => ({ at: t, promptTokens: 1, outputTokens: 1 }));
    expect(bursts(at, 1500)).toEqual([[0, 1, 2], [3, 4], [5]]);
  });

  it("a late request queued behind another adapter's load is counted in time without the stall, not without its own load", () => {
    const url = 'http://replica-0:8000';
    const load = (adapter: string, start: number): PlacedLoad => ({
      url,
      adapter,
      asked: start,
      start,
      end: start + 300,
      running: 1,
      waiting: 0,
      idleOthers: 1,
      copy: false,
    });
    // Request 0 (adapter x) queued from 0 to 5,200 behind b's load (1,000-1,300): TTFT 5,250.
    // Request 1 (adapter y) in time. Request 2 refused.
    const timelines: (Timeline | undefined)[] = [
      { url, at: 0, routed: 0, start: 5200, first: 5250, end: 6000 },
      { url, at: 0, routed: 0, start: 100, first: 150, end: 500 },
      undefined,
    ];
    const arrivals = [0, 0, 0].map((t) => ({ at: t, promptTokens: 1, outputTokens: 1 }));
    const a = anatomy(arrivals, ['x', 'y', 'z'], timelines, [load('b', 1000)]);
    expect(a).toMatchObject({
      late: 1,
      refused: 1,
      savedWithoutStall: 1,
      savedWithoutOwnLoad: 0,
      savedWithoutLoads: 1,
      loads: 1,
      copies: 0,
      busyWhileIdle: 1,
      // Only request 0 was queued while b's load ran (request 1 had started by then).
      stalledRequests: 1,
      stalledLate: 1,
    });
    expect(a.msByPart.otherLoads).toBe(300);
  });
});
