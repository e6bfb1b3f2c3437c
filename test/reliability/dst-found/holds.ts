/**
 * Schedules the deterministic simulation found breaking an invariant of docs/reliability.md on
 * main, kept as written (not as seeds, so a change to the generator keeps them): each replays
 * exactly and must hold every invariant now. `npm run dst -- --seed S --keep ...` printed them.
 * Each file of this folder holds the ones about one invariant or concern; this module, what they share.
 */
import { runSchedule } from '../../../dst/run';
import type { Schedule } from '../../../dst/schedule';

export const WORLD: Schedule['world'] = {
  nodes: 3,
  replicas: 3,
  maxLoadedAdapters: 1,
  adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math', 'law', 'med', 'fin', 'bio', 'geo'],
  loadMs: 1500,
  decodeMsPerStep: 100,
  coldLoadsPerMinute: 1000,
  leaseMaxAgeMs: 4000,
  ttftSloMs: 1000,
  spanMs: 6000,
};

/** Seed 2300's world: two replicas of four slots, the static `sql,chat` on each. */
export const WORLD_2300: Schedule['world'] = {
  ...WORLD,
  replicas: 2,
  maxLoadedAdapters: 4,
  adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math'],
  staticAdapters: ['sql,chat'],
  upstreamTimeoutMs: 5000,
};

/** Replays a kept schedule: every invariant must hold now. */
export async function holds(
  seed: number,
  world: Schedule['world'],
  actions: Schedule['actions'],
): Promise<void> {
  expect((await runSchedule({ seed, world, actions })).violation).toBeUndefined();
}
