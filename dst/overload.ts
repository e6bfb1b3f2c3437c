/**
 * Overload in a schedule (dst/schedule.ts), each from a stream of its own so the seeds without it
 * keep their schedules: a crowd at one node, whose gateway then holds a backlog the spread
 * requests never make (the refusal at a hold's end, 503 `ttft_overload`: src/router/room-wait.ts),
 * and SLO classes (`slo_classes`), each request naming one or none by its header (the class gate,
 * the sheddable refusal, 503 `shed_low_priority`), and in a share of those a bound on the batch
 * class's requests in flight on a replica (`max_in_flight`), with a burst of batch requests to
 * reach it (dst/bound-check.ts judges it).
 */
import { seededRandom, type Random } from '../src/random';
import { int } from './draws';
import type { Action, WorldSettings } from './schedule';

/**
 * Adds a crowd (a share of the busy seeds) and SLO classes (a share of all) to `actions` and
 * `world`; with `bound`, a bounded batch class and its burst in a share of the class seeds.
 */
export function overload(
  seed: number,
  quiet: boolean,
  world: WorldSettings,
  actions: Action[],
  bound = true,
): void {
  const crowded = seededRandom(seed * 2654435761 + 7);
  if (!quiet && crowded() < CROWD_SHARE) actions.push(...crowd(crowded, world));
  // After the crowd, so its requests name classes too.
  const classes = seededRandom(seed * 2654435761 + 8);
  if (classes() < CLASSES_SHARE) {
    world.sloClasses = SLO_CLASSES.map((c) => ({ ...c }));
    for (const a of actions) {
      if (a.kind !== 'request') continue;
      const x = classes();
      if (x < 0.45) a.cls = 'interactive';
      else if (x < 0.85) a.cls = 'batch';
    }
    // A stream of its own again: the class seeds without the bound keep their schedules.
    const bounded = seededRandom(seed * 2654435761 + 9);
    if (bound && bounded() < BOUND_SHARE) actions.push(...batchBurst(bounded, world));
  }
}

/** The share of the class seeds whose batch class has `max_in_flight`. */
const BOUND_SHARE = 0.5;

/**
 * The batch class bounded at 1-3 requests in flight on a replica, and a burst of batch requests
 * that passes it: 3-8 of them within 300 ms, mostly at one node (its decisions at the same moment:
 * the race of b19fa25), some at the others (a count across nodes), on the base model or one
 * adapter, each decoding 10-30 tokens (0.5-3 s) so they stay in flight while the later ones
 * decide, and wake together when one ends.
 */
function batchBurst(r: Random, world: WorldSettings): Action[] {
  const batch = world.sloClasses!.find((c) => c.name === 'batch')!;
  batch.max_in_flight = int(r, 1, 3);
  const node = int(r, 0, world.nodes - 1);
  const from = int(r, 0, Math.max(0, world.spanMs - 300));
  const adapter = r() < 0.5 ? -1 : int(r, 0, world.adapters.length - 1);
  const count = int(r, 3, 8);
  const actions: Action[] = [];
  for (let i = 0; i < count; i++)
    actions.push({
      at: from + int(r, 0, 300),
      kind: 'request',
      node: r() < 0.75 ? node : int(r, 0, world.nodes - 1),
      adapter,
      tokens: int(r, 10, 30),
      prompt: int(r, 10, 500),
      cls: 'batch',
    });
  return actions;
}

/** The share of busy seeds with a crowd at one node. */
const CROWD_SHARE = 0.2;
/** The share of seeds with SLO classes. */
const CLASSES_SHARE = 0.3;
/**
 * The classes a seed with classes runs: an interactive class (the priority of a request naming
 * none, with its own objective) and a sheddable batch class behind it (its gate the interactive
 * class's objective).
 */
const SLO_CLASSES = [
  { name: 'interactive', ttft_ms: 1000, priority: 0 },
  { name: 'batch', ttft_ms: 2500, priority: -1 },
] as const;
/**
 * A crowd's queue_timeout_ms: its hold (queue_timeout_ms - ttft_slo_ms) 1 s, so the late hold-ends
 * a refusal needs (a whole hold of them, under the backlog) come within a few seconds of crowd. A
 * hold of 1.5 s refused in 3 of the 53 crowds of seeds 1-400, one of 1 s in 9; the default 8 s
 * (a hold of 7 s) would need a crowd of over 14 s.
 */
const CROWD_QUEUE_TIMEOUT_MS = 2000;

/**
 * A crowd's replicas' running slots: few, so a crowd of a few tens of requests fills them and their
 * queues (what the prediction reads as a wait for a slot) build, as 16 slots would need hundreds.
 */
const CROWD_MAX_NUM_SEQS = 4;

/**
 * A burst at one node, for 3-5 s: more requests than its replicas' slots start within the
 * objective (12-16 a replica, long prompts, 20-60 output tokens), so their queues stay past it
 * while the crowd lasts; its gateway then holds a backlog of three times the replicas and more,
 * and a hold that ends with every replica still predicted late is refused.
 */
function crowd(r: Random, world: WorldSettings): Action[] {
  world.ttftSloMs = 1000;
  world.queueTimeoutMs = CROWD_QUEUE_TIMEOUT_MS;
  world.maxNumSeqs = CROWD_MAX_NUM_SEQS;
  const node = int(r, 0, world.nodes - 1);
  const from = int(r, 0, Math.max(0, world.spanMs - 1000));
  const lastsMs = int(r, 3000, 5000);
  const count = int(r, 12, 16) * world.replicas;
  // A few adapters (often the same: their holders' queues), and the base model.
  const adapters = [-1, ...Array.from({ length: 3 }, () => int(r, 0, world.adapters.length - 1))];
  const actions: Action[] = [];
  for (let i = 0; i < count; i++)
    actions.push({
      at: from + int(r, 0, lastsMs),
      kind: 'request',
      node,
      adapter: adapters[int(r, 0, adapters.length - 1)]!,
      tokens: int(r, 20, 60),
      prompt: int(r, 1000, 2000),
    });
  world.spanMs = Math.max(world.spanMs, from + lastsMs);
  return actions;
}
