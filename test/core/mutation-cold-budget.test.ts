/**
 * Unit test of spendColdLoad (src/router/cold-budget.ts, one module): which budgets a cold load is
 * counted against, in which order, and the 429 a refusal gives. The real-parts proof is
 * test/kong/cold-budget.test.ts (a plugin server, too slow for `npm run mutation:safety`); no
 * in-process suite asserted this module, so every mutant of it survived there
 * (docs/reliability/mutation-testing.md). The store is the in-process one, spied on.
 */
import type { Clock } from '../../src/clock';
import { RouterError } from '../../src/errors';
import { MemoryFleetStore } from '../../src/fleet/memory-store';
import { spendColdLoad, type ColdLoadBudget } from '../../src/router/cold-budget';
import type { FleetRuntime } from '../../src/runtime';

function setup(at = 1_000) {
  const t = { now: at };
  const clock: Clock = { now: () => t.now, after: () => () => undefined };
  const store = new MemoryFleetStore();
  const calls: [string, number, number, number][] = [];
  const spend = store.spendBudget.bind(store);
  store.spendBudget = (key, limit, windowMs, now) => {
    calls.push([key, limit, windowMs, now]);
    return spend(key, limit, windowMs, now);
  };
  // spendColdLoad reads the runtime's store and clock only.
  const rt = { store, clock } as unknown as FleetRuntime;
  return { t, rt, calls };
}

async function refusal(p: Promise<void>): Promise<RouterError> {
  const err: unknown = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!(err instanceof RouterError)) throw new Error(`expected a RouterError, got ${String(err)}`);
  return err;
}

const both: ColdLoadBudget = { perMinute: 2, perConsumerPerMinute: 1 };

describe('spendColdLoad', () => {
  it("counts the consumer's budget, then the fleet's, over a one-minute window at the clock's time", async () => {
    const { rt, calls } = setup(5_000);
    let asked = 0;
    await spendColdLoad(rt, both, 'a', async () => {
      asked++;
      return 'alice';
    });
    expect(asked).toBe(1);
    expect(calls).toEqual([
      ['consumer:alice', 1, 60_000, 5_000],
      ['fleet', 2, 60_000, 5_000],
    ]);
  });

  it('refuses past the fleet budget with a 429 whose Retry-After is the window left, rounded up', async () => {
    const { t, rt } = setup(0);
    const fleetOnly: ColdLoadBudget = { perMinute: 1, perConsumerPerMinute: 0 };
    await spendColdLoad(rt, fleetOnly, 'a');
    t.now = 500; // 59.5 s left of the window: 60 s
    const err = await refusal(spendColdLoad(rt, fleetOnly, 'a'));
    expect(err.status).toBe(429);
    expect(err.code).toBe('rate_limit_exceeded');
    expect(err.retryAfterS).toBe(60);
    expect(err.message).toContain("Adapter 'a'");
    expect(err.message).toContain('the fleet has');
  });

  it('gives at least 1 s of Retry-After when under a second of the window is left', async () => {
    const { t, rt } = setup(0);
    const fleetOnly: ColdLoadBudget = { perMinute: 1, perConsumerPerMinute: 0 };
    await spendColdLoad(rt, fleetOnly, 'a');
    t.now = 59_999; // 1 ms left
    expect((await refusal(spendColdLoad(rt, fleetOnly, 'a'))).retryAfterS).toBe(1);
  });

  it("refuses past the consumer's budget naming the consumer, and does not count the fleet's then", async () => {
    const { rt, calls } = setup(0);
    const alice = async () => 'alice';
    await spendColdLoad(rt, both, 'a', alice);
    calls.length = 0;
    const err = await refusal(spendColdLoad(rt, both, 'a', alice));
    expect(err.status).toBe(429);
    expect(err.message).toContain('this consumer has');
    expect(calls.map((c) => c[0])).toEqual(['consumer:alice']);
    // Another consumer still has its own budget, and the fleet one load left.
    await spendColdLoad(rt, both, 'a', async () => 'bob');
  });

  it('counts no consumer budget when it is 0, when no consumer is known, or without a way to ask', async () => {
    const { rt, calls } = setup();
    let asked = 0;
    const ask = async () => {
      asked++;
      return 'alice';
    };
    await spendColdLoad(rt, { perMinute: 5, perConsumerPerMinute: 0 }, 'a', ask);
    expect(asked).toBe(0);
    const roomy: ColdLoadBudget = { perMinute: 5, perConsumerPerMinute: 1 };
    await spendColdLoad(rt, roomy, 'a', async () => undefined);
    await spendColdLoad(rt, roomy, 'a');
    expect(calls.map((c) => c[0])).toEqual(['fleet', 'fleet', 'fleet']);
  });

  it('counts no fleet budget when it is 0: nothing is spent and nothing refused', async () => {
    const { rt, calls } = setup();
    const none: ColdLoadBudget = { perMinute: 0, perConsumerPerMinute: 0 };
    for (let i = 0; i < 3; i++) await spendColdLoad(rt, none, 'a');
    expect(calls).toEqual([]);
  });

  it('grants exactly the budget within a window, then again in the next', async () => {
    const { t, rt } = setup(0);
    const fleetOnly: ColdLoadBudget = { perMinute: 2, perConsumerPerMinute: 0 };
    await spendColdLoad(rt, fleetOnly, 'a');
    await spendColdLoad(rt, fleetOnly, 'b');
    await refusal(spendColdLoad(rt, fleetOnly, 'c'));
    t.now = 60_000;
    await spendColdLoad(rt, fleetOnly, 'c');
  });
});
