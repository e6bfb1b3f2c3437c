/**
 * A test hook, off unless its environment variable is set: the randomized fault run
 * (docs/reliability.md) skews one Kong node's clock, and a real process's wall clock cannot be
 * moved without root or an LD_PRELOAD library (libfaketime) the project does not ship. With
 * `LORA_TEST_CLOCK_SKEW_MS=N`, SIGUSR2 toggles this process's clock between true time and N ms
 * ahead (N < 0: behind). Every routing decision takes its time from `systemClock`, so patching
 * that one object skews the whole node; without the variable nothing is patched and the
 * request path is untouched.
 */
import { systemClock } from '../src/clock';

export const CLOCK_SKEW_ENV = 'LORA_TEST_CLOCK_SKEW_MS';

/** Installs the SIGUSR2 toggle when the variable is set; returns whether it did. */
export function installClockSkewHook(env: NodeJS.ProcessEnv = process.env): boolean {
  const raw = env[CLOCK_SKEW_ENV];
  if (raw === undefined || raw === '') return false;
  const skewMs = Number(raw);
  if (!Number.isFinite(skewMs)) {
    // A stray value must not stop a gateway's plugin server from starting: say so, patch nothing.
    console.error(`${CLOCK_SKEW_ENV} must be a number of ms, got ${raw}: ignored`);
    return false;
  }
  const trueNow = systemClock.now.bind(systemClock);
  let offset = 0;
  systemClock.now = () => trueNow() + offset;
  process.on('SIGUSR2', () => {
    offset = offset === 0 ? skewMs : 0;
    console.log(`clock skew ${offset} ms (${CLOCK_SKEW_ENV})`);
  });
  return true;
}
