/**
 * The randomized fault run, short (docs/reliability/fault-run.md): 25 s of traffic
 * through three real plugin servers sharing one redis-server, each node's link through a TCP
 * proxy, while the nemesis meets every kind of fault once. Every invariant must hold, checked
 * from the simulated replicas' own logs and from Redis and each node after the run.
 * `npm run chaos -- --minutes N --seed S` runs it longer.
 *
 * Seed 1's schedule in 25 s is the first six of its faults in 35 s (the schedule depends on the
 * seed and the end only): every kind by 15 s, then a partition longer than node_ttl_ms, so the
 * partitioned node looks dead to the others. The 35-s run added only a second FLUSHALL and a
 * second Redis restart with persistence, 10 s more of the suite's time.
 */
import { formatReport } from '../../chaos/report';
import { runChaos } from '../../chaos/run';

describe('randomized fault run (short)', () => {
  it('keeps every invariant through partitions, FLUSHALL, Redis restarts, redis record changes and clock skew', async () => {
    const report = await runChaos({ seed: 1, trafficMs: 25_000 });
    // The run must have exercised what it checks.
    expect(new Set(report.schedule.map((s) => s.fault.kind))).toEqual(
      new Set(['partition', 'flushall', 'redis-restart', 'redis-record', 'clock-skew']),
    );
    expect(report.traffic.byStatus['200'] ?? 0).toBeGreaterThan(20);
    const [busy, loaded, leases, budget] = report.invariants;
    expect(busy!.checks).toBeGreaterThan(0);
    expect(loaded!.checks).toBeGreaterThan(0);
    expect(leases!.checks).toBe(10);
    expect(budget!.checks).toBeGreaterThan(0);
    // The report in the failure message: which invariant, where and when, and the schedule.
    const failed = report.ok ? '' : formatReport(report, 20);
    expect(failed).toBe('');
  }, 240_000);
});
