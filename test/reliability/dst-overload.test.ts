/**
 * Overload in the explorer (docs/reliability/explored-schedules.md, "Crowds and SLO classes"): a
 * crowd at one node holds a backlog in its gateway and refuses at a hold's end (503
 * `ttft_overload`); a sheddable class is refused (503 `shed_low_priority`). A refused request
 * leaves nothing behind, its count among the held (HeldClasses) included: planted in the real
 * code, a refused request left counted as held, on a seed that breaks with the plant and holds
 * without it.
 */
import { DEFAULT_OPTIONS, runSeed } from '../../dst/run';
import { RouterError } from '../../src/errors';
import { RoomWait } from '../../src/router/room-wait';
import type { HeldClasses } from '../../src/router/slo-class';
import { setAsidePollOrder } from '../helpers/dst-fixtures';

const LEFT = 'a request leaves the gateway when it ends';

type HoldsNow = (this: RoomWait, now: number, decided: unknown) => boolean;
const proto = RoomWait.prototype as unknown as { holdsNow: HoldsNow };

describe("a refused request's exit from the held count, planted away in the real code", () => {
  const holdsNow = proto.holdsNow;

  afterEach(() => {
    proto.holdsNow = holdsNow;
  });

  /** A refusal (ttft_overload, shed_low_priority) counts its request among the held again after leaving. */
  const refusedStaysHeld = () => {
    proto.holdsNow = function (now, decided) {
      try {
        return holdsNow.call(this, now, decided);
      } catch (err) {
        const w = this as unknown as { held?: HeldClasses; priority: number };
        if (err instanceof RouterError) w.held?.enter(w.priority);
        throw err;
      }
    };
  };

  /** Seed 10 as found, before the shapes of dst/reach.ts (it draws the class held behind a higher one). */
  const AS_DRAWN = { ...DEFAULT_OPTIONS, reach: false };

  it.each([
    // A crowd of 45 requests at node 0 (3 replicas, 4 running slots each): its gateway held up to
    // 22 at once, and 11 holds ended late under that backlog, refused.
    [88, 'ttftOverload'],
    // A crowd of 42 at node 1 with SLO classes: batch requests shed once they could no longer meet
    // their 2.5 s objective.
    [10, 'shed'],
  ] as const)(
    'seed %i (%s refusals) breaks it; holds without the plant',
    async (seed, refusal) => {
      // 88 holds with the plant since a poll round scrapes the replicas it knows beside the list's
      // read (branch poll-specs): both replay with the poller's order before it.
      const pollOrder = setAsidePollOrder();
      try {
        refusedStaysHeld();
        const planted = await runSeed(seed, AS_DRAWN);
        expect(planted.violation?.invariant).toBe(LEFT);
        expect(planted.violation?.detail).toMatch(
          /^node \d: \d+ request\(s\) counted as held with \d+ routing$/,
        );
        expect(planted.overloadRefusals[refusal]).toBeGreaterThan(0);
        proto.holdsNow = holdsNow;
        const r = await runSeed(seed, AS_DRAWN);
        expect(r.violation).toBeUndefined();
        expect(r.overloadRefusals[refusal]).toBeGreaterThan(0);
      } finally {
        pollOrder();
      }
    },
    30_000,
  );
});
