/**
 * Runs schedules: one seed's (generated), a shrunk one (the seed's actions kept by index), and
 * the shrinking itself: drop actions while the same invariant still breaks.
 */
import { generate, type Schedule, type ScheduleOptions } from './schedule';
import { World, type RunResult } from './world';

export const DEFAULT_OPTIONS: ScheduleOptions = { actions: 16 };
/**
 * The default schedules as drawn before crowds and SLO classes (and the shapes of dst/reach.ts,
 * drawn only with them): the seeds tests replay by number were found so.
 */
export const AS_FOUND: ScheduleOptions = { ...DEFAULT_OPTIONS, overload: false };
/**
 * The default schedules as drawn before clients that give up, later plugins' answers and slow
 * source calls (dst/client-draw.ts): seeds tests replay by number for what they met so keep it.
 */
export const BEFORE_CLIENTS: ScheduleOptions = { ...DEFAULT_OPTIONS, clients: false };

export async function runSchedule(s: Schedule): Promise<RunResult> {
  return new World(s).run();
}

export async function runSeed(
  seed: number,
  o: ScheduleOptions = DEFAULT_OPTIONS,
  keep?: readonly number[],
): Promise<RunResult & { schedule: Schedule }> {
  const full = generate(seed, o);
  const schedule = keep ? { ...full, actions: keep.map((i) => full.actions[i]!) } : full;
  return { ...(await runSchedule(schedule)), schedule };
}

/**
 * Shrinks a failing seed's schedule: removes chunks of actions, then single ones, keeping each
 * removal after which the same invariant still breaks. Returns the indices kept (into the
 * seed's generated actions), so `--seed S --keep i,j,k` replays it.
 */
export async function shrink(
  seed: number,
  o: ScheduleOptions,
  invariant: string,
  budget = 200,
): Promise<{ keep: number[]; result: RunResult }> {
  const full = generate(seed, o);
  let keep = full.actions.map((_, i) => i);
  let best: RunResult | null = null;
  let runs = 0;
  const fails = async (k: number[]): Promise<RunResult | null> => {
    runs++;
    const r = await runSchedule({ ...full, actions: k.map((i) => full.actions[i]!) });
    return r.violation?.invariant === invariant ? r : null;
  };
  for (let chunk = Math.max(1, keep.length >> 1); chunk >= 1 && runs < budget; chunk >>= 1) {
    for (let start = 0; start < keep.length && runs < budget; ) {
      const candidate = [...keep.slice(0, start), ...keep.slice(start + chunk)];
      const r = candidate.length < keep.length ? await fails(candidate) : null;
      if (r) {
        keep = candidate;
        best = r;
      } else start += chunk;
    }
  }
  best ??= (await fails(keep))!;
  return { keep, result: best };
}
