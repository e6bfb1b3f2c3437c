/**
 * What the files of this folder share: the simulation's checks (dst/invariants.ts) run on hand-made logs.
 */
import { InvariantBroken, LogChecks, type LoadCall, type WorldView } from '../../../dst/invariants';
import { type BudgetOp } from '../../../dst/redis-model';
import { dstLimits } from '../../helpers/dst-fixtures';

export const LIMITS = dstLimits(1, 3);

export function checked(calls: Omit<LoadCall, 'proc' | 'sender' | 'alone'>[]): string | undefined {
  const loads = calls.map((c) => ({ ...c, proc: 'n0g0', sender: 'n0g0r0', alone: false }));
  return broken(new LogChecks([], LIMITS, () => false, { loads, failed: [], backoffMs: 1000 }), 10_000);
}

/** The invariant the checks find broken at `now` (none: undefined). */
export function broken(checks: LogChecks, now: number, resets: WorldView['resets'] = []): string | undefined {
  try {
    checks.check({ now, step: 1, degraded: false, lastFaultAt: -Infinity, resets });
    return undefined;
  } catch (err) {
    if (err instanceof InvariantBroken) return err.v.invariant;
    throw err;
  }
}

/** A granted spend of the fleet's budget at `at` by `request`, its answer delivered. */
export const grant = (at: number, request: number): BudgetOp => ({
  op: 'spend',
  at,
  key: 'fleet',
  waitMs: 0,
  request,
  delivered: true,
});
