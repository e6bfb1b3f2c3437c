/**
 * Breaks a reviewer found by reading (store-review), which no sweep had reached, now reached by
 * the explorer (docs/reliability/explored-schedules.md, "Slow paths"): each planted in the real
 * code as before its fix, on a seed that breaks with the plant and holds without.
 */
import { runSeed } from '../../dst/run';
import { MemoryLeases } from '../../src/fleet/memory-leases';

const BUSY = 'no unload of a busy adapter';

describe('a lease taken before its replica was registered again (f4d84fe), reached', () => {
  const take = MemoryLeases.prototype.take;

  afterEach(() => {
    MemoryLeases.prototype.take = take;
  });

  /** As before f4d84fe: a lease open already is left as it is, counted or not. */
  const retakeCountsNothing = () => {
    MemoryLeases.prototype.take = function (lease) {
      if ((this as unknown as { leases: Map<string, unknown> }).leases.has(lease.id)) return false;
      return take.call(this, lease);
    };
  };

  it('seed 14963: a FLUSHALL straddles node decisions, their requests on a slow path; a peer unloads under one', async () => {
    retakeCountsNothing();
    const r = await runSeed(14963);
    expect(r.violation?.invariant).toBe(BUSY);
    expect(r.violation?.detail).toMatch(
      /^team,a unloaded from http:\/\/replica-1:8000 at \d+ ms with 1 request\(s\) routed to it on their way$/,
    );
    MemoryLeases.prototype.take = take;
    expect((await runSeed(14963)).violation).toBeUndefined();
  }, 30_000);
});
