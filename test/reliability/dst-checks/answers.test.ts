/**
 * The simulation's checks (dst/invariants.ts) against what docs/reliability.md promises, on the
 * requests' answers: a hold judged idle only when nothing could change while it routed, and a 500 the
 * router answers on an unexpected failure.
 */
import { waitedIdle } from '../../../dst/hold-check';
import { AS_FOUND, runSeed } from '../../../dst/run';
import { RouterService } from '../../../src/router/router';

describe('the simulation judges a hold idle only when nothing could change while it routed (issue 31 item 1c)', () => {
  // Seed 16974's figures: bound 3,400 ms (loads of 200 ms), the request at 1,811 ms routed in 8,055 ms.
  const request = { began: 1811, took: 8055, alone: true, last: true, slowMs: 0 };
  const scope = { lastFaultAt: 1756, lastRecordChange: -Infinity, boundMs: 3400 };

  it('a request alone, no fault since it came, routed past the bound breaks it', () => {
    expect(waitedIdle(request, scope)).toBe(true);
    expect(waitedIdle({ ...request, took: 3400 }, scope)).toBe(false);
    expect(waitedIdle({ ...request, alone: false }, scope)).toBe(false);
    expect(waitedIdle({ ...request, last: false }, scope)).toBe(false);
    expect(waitedIdle(request, { ...scope, lastFaultAt: 1900 })).toBe(false);
  });

  it('a request that came while a record change still reached the nodes is out of scope (seed 16974)', () => {
    // Pushed from 34 ms to the three nodes 1,189 ms apart: node 2 took it at 2,412 ms, after the request came.
    expect(waitedIdle(request, { ...scope, lastRecordChange: 2412 })).toBe(false);
    expect(waitedIdle(request, { ...scope, lastRecordChange: 1811 })).toBe(false);
    // Every node had taken it before the request came: judged.
    expect(waitedIdle(request, { ...scope, lastRecordChange: 1223 })).toBe(true);
  });

  it('the time its decision waited on a slow path is no idle hold, the rest is judged (seed 536271)', () => {
    // Node 1's path to replica-1 slow 1,741-3,072 ms (1,829 ms each way); its request for `law` came at
    // 1,989 ms (the last fault healed at 1,439), its registry read before the load timed out after 1,000
    // ms (1,999 ms), its load call after 3,000 (3,005 ms), both over the path: routed after 4,021 ms.
    const law = { began: 1989, took: 4021, alone: true, last: true, slowMs: 4000 };
    const quiet = { ...scope, lastFaultAt: 1439 };
    expect(waitedIdle(law, quiet)).toBe(false);
    // Past the bound by more than the slow path took: judged.
    expect(waitedIdle({ ...law, slowMs: 600 }, quiet)).toBe(true);
    expect(waitedIdle({ ...law, slowMs: 621 }, quiet)).toBe(false);
  });
});

/**
 * An answer the router makes itself on an unexpected failure (500 `router_error`: RouterService.route
 * turns any throw into it, the stack going to the gateway error log) is no behaviour a fault or an
 * overload explains, yet no check read it: the answers' tally over seeds 1-3,000 (with and without
 * overload) found none, so the check has no excuse.
 */
describe('the simulation judges a 500 the router answers on an unexpected failure', () => {
  type Decide = (...args: unknown[]) => Promise<unknown>;
  const proto = RouterService.prototype as unknown as { decide: Decide };
  const decide = proto.decide;
  afterEach(() => {
    proto.decide = decide;
  });

  it('a request whose decision throws breaks it (seed 13: three requests, no fault); the real code holds', async () => {
    let thrown = 0;
    proto.decide = function (this: unknown, ...args: unknown[]) {
      if (thrown++ === 0) return Promise.reject(new TypeError('planted'));
      return decide.apply(this, args);
    };
    const r = await runSeed(13, AS_FOUND);
    expect(r.violation?.invariant).toBe('no request is answered 500 router_error');
    expect(r.violation?.detail).toMatch(
      /^request 1 \(chat\) on node 2, came at 442 ms, answered 500 router_error$/,
    );
    proto.decide = decide;
    expect((await runSeed(13, AS_FOUND)).violation).toBeUndefined();
  }, 30_000);
});
