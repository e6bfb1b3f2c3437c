/**
 * The Redis fleet store's scripts by name (each one operation, run atomically for all nodes),
 * gathered from their groups: registration, residency, load and unload locks, leases, budget, forgetting.
 */
import { BUDGET_SCRIPTS } from './budget';
import { FORGETTING_SCRIPTS } from './forgetting';
import { LEASE_SCRIPTS } from './leases';
import { LOAD_LOCK_SCRIPTS } from './load-locks';
import { PRELUDE } from './prelude';
import { REGISTRATION_SCRIPTS } from './registration';
import { RESIDENCY_SCRIPTS } from './residency';

export { SKEW_MARGIN_MS } from './prelude';

/** name -> body; each runs with ARGV[1] = prefix and no KEYS. */
export const SCRIPTS = {
  ...REGISTRATION_SCRIPTS,
  ...RESIDENCY_SCRIPTS,
  ...LOAD_LOCK_SCRIPTS,
  ...LEASE_SCRIPTS,
  ...BUDGET_SCRIPTS,
  ...FORGETTING_SCRIPTS,
} as const;

export type ScriptName = keyof typeof SCRIPTS;

/** The body Redis runs: the shared helpers, then the operation. */
export function scriptSource(name: ScriptName): string {
  return PRELUDE + SCRIPTS[name];
}
