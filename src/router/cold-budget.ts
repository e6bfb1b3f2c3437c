import { errors } from '../errors';
import type { FleetRuntime } from '../runtime';

/** Adapter loads that may start per minute: fleet-wide, and per Kong consumer (0: no bound). */
export interface ColdLoadBudget {
  perMinute: number;
  perConsumerPerMinute: number;
}

/** The budgets' window (a fixed one in the store, opened by its first spend). */
export const COLD_LOAD_WINDOW_MS = 60_000;
/** The store's key of the fleet's budget (the simulation's checks read its spends). */
export const FLEET_BUDGET_KEY = 'fleet';

/**
 * Counts a load a request is about to start against its consumer's budget and the fleet's;
 * past either, throws 429 with Retry-After. The budgets live in the fleet store: with Redis,
 * every node counts against the same ones. The consumer is asked for only here, so a request
 * for a resident adapter never pays for it.
 */
export async function spendColdLoad(
  rt: FleetRuntime,
  budget: ColdLoadBudget,
  adapter: string,
  consumer?: () => Promise<string | undefined>,
): Promise<void> {
  const id = budget.perConsumerPerMinute > 0 && consumer ? await consumer() : undefined;
  const spend: [string, number, 'consumer' | 'fleet'][] = [];
  if (id !== undefined) spend.push([`consumer:${id}`, budget.perConsumerPerMinute, 'consumer']);
  if (budget.perMinute > 0) spend.push([FLEET_BUDGET_KEY, budget.perMinute, 'fleet']);
  for (const [key, limit, scope] of spend) {
    const waitMs = await rt.store.spendBudget(key, limit, COLD_LOAD_WINDOW_MS, rt.clock.now());
    if (waitMs > 0) throw errors.coldLoadBudget(adapter, scope, Math.max(1, Math.ceil(waitMs / 1000)));
  }
}
