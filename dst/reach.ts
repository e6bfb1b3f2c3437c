/**
 * Shapes two reviews found by reading that no drawn schedule reached (2026-12-06), each from a
 * stream of its own and drawn after every other draw of a seed, so the seeds without them keep
 * their schedules (dst/schedule.ts):
 *
 * - a node's own registration first after an emptied state: Kong pushes a router configuration to
 *   a node with a request on its way and otherwise idle, right after a FLUSHALL, and its replicas'
 *   registration begins the new state, or is the first the node reads of it (FailoverFleetStore
 *   `upsertReplica`);
 * - a lower class held behind a higher one for longer than `queue_timeout_ms` (room-wait.ts
 *   `holdUntil`): a small `queue_timeout_ms`, a batch class with an objective of minutes, and a
 *   sustained interactive overload at one node (dst/access-check.ts judges it);
 * - then, in the seeds with neither, the failover shapes of dst/reach-failover.ts.
 */
import { seededRandom, type Random } from '../src/random';
import { int } from './draws';
import { emptiedEachPass, owedEndOnMove } from './reach-failover';
import type { Action, FaultKind, WorldSettings } from './schedule';
import { NODE_TTL_MS, SLOW_HOP_MS } from './world-timings';

/** The share of busy seeds with a configuration pushed to a node right after an emptied state. */
const OWN_REGISTRATION_SHARE = 0.06;
/** The share of the other busy seeds with a batch class held behind a sustained interactive overload. */
const HELD_BEHIND_SHARE = 0.04;
/** The share of the other busy seeds with a lock end owed to the old state on a move to other state. */
const OWED_END_SHARE = 0.04;
/** The share of the rest with a FLUSHALL every few ms for a while (a registration emptied in each pass). */
const EMPTIED_EACH_PASS_SHARE = 0.04;

/**
 * Adds the shapes to `actions` and `world` (replacing them: each leaves out what would blur it): a
 * push after an emptied state in a share of the busy seeds whose faults include it, else a class
 * held behind a higher one in a share of the rest.
 */
export function reach(
  seed: number,
  quiet: boolean,
  world: WorldSettings,
  actions: Action[],
  faults: readonly FaultKind[],
): void {
  if (quiet) return;
  const own = seededRandom(seed * 2654435761 + 10);
  if (
    faults.includes('flushall') &&
    faults.includes('config-push') &&
    faults.includes('slow-path') &&
    own() < OWN_REGISTRATION_SHARE
  )
    return ownRegistrationAfterEmptying(own, world, actions);
  const behind = seededRandom(seed * 2654435761 + 11);
  if (behind() < HELD_BEHIND_SHARE) return heldBehindHigher(behind, world, actions);
  // The failover shapes (dst/reach-failover.ts), in the seeds with neither shape above.
  const owed = seededRandom(seed * 2654435761 + 12);
  if (faults.includes('partition') && faults.includes('record-change') && owed() < OWED_END_SHARE)
    return owedEndOnMove(owed, world, actions);
  const emptied = seededRandom(seed * 2654435761 + 13);
  if (faults.includes('flushall') && emptied() < EMPTIED_EACH_PASS_SHARE)
    emptiedEachPass(emptied, world, actions);
}

/**
 * Node `x` warms an adapter (one short request), then sends a request on it down slow paths to
 * every replica (1.5-3 s each way: it is on its way, no replica reports it yet, and `x`'s polls
 * time out, so no trim after a poll reads the views for it, adapters/poll-trim.ts `PollTrim.after`) and
 * nothing more. Its decision ended (the adapter loaded: views and a lease), a FLUSHALL just after
 * the nodes' heartbeats (every node_ttl_ms / 4 from their start at 0, RedisFleetStore), and
 * before `x`'s next one reads the emptied state Kong pushes a router configuration to `x`, whose
 * registration of its replicas is the first on the new state or the first `x` reads of it. Past
 * the grace (node_ttl_ms), while the request is still on its way, the other nodes' requests on
 * other adapters press for room. Every other fault, and `x`'s other requests, would have `x` take
 * its leases back another way (a decision's views, a recovery) or keep deciding: left out.
 */
function ownRegistrationAfterEmptying(r: Random, world: WorldSettings, actions: Action[]): void {
  const x = int(r, 0, world.nodes - 1);
  const kept = actions.filter((a) => a.kind === 'request' && a.node !== x);
  const all = world.adapters.map((_, i) => i);
  const adapter = int(r, 0, all.length - 1);
  const ttl = world.nodeTtlMs ?? NODE_TTL_MS;
  const beat = Math.max(100, ttl / 4);
  const warm = int(r, 0, 300);
  // Once the warm request's load landed and a poll told the nodes.
  const sendAt = warm + 2 * world.loadMs + int(r, 1000, 1500);
  const request = (at: number): Action => ({
    at,
    kind: 'request',
    node: x,
    adapter,
    tokens: int(r, 1, 20),
    prompt: int(r, 10, 2000),
  });
  kept.push(request(warm), request(sendAt));
  const flushAt = Math.ceil((sendAt + int(r, 30, 150)) / beat) * beat + int(r, 2, beat / 4);
  const pushAt = flushAt + int(r, 1, beat / 4);
  // Each way: past the grace after the push, so the others' requests decide while it is on its
  // way. Drawn from the send, the hop fell short of the push's grace in 0.19% of these seeds
  // (2401991): the window below was upside down and they pressed only once it had arrived.
  const hopMs = Math.max(
    int(r, Math.max(SLOW_HOP_MS[0], ttl + 500), SLOW_HOP_MS[1]),
    pushAt + ttl + 500 - sendAt,
  );
  for (let replica = 0; replica < world.replicas; replica++)
    kept.push({ at: sendAt - 20, kind: 'slow-path', node: x, replica, ms: pushAt - sendAt + hopMs, hopMs });
  kept.push({ at: flushAt, kind: 'flushall' }, { at: pushAt, kind: 'config-push', node: x });
  const others = all.filter((i) => i !== adapter);
  const pressFrom = pushAt + ttl;
  const pressTo = sendAt + hopMs;
  for (let i = 0; i <= 2 * world.maxLoadedAdapters * world.replicas + 1 && others.length > 0; i++)
    kept.push({
      at: int(r, pressFrom, pressTo),
      kind: 'request',
      node: (x + 1 + int(r, 0, world.nodes - 2)) % world.nodes,
      adapter: others[int(r, 0, others.length - 1)]!,
      tokens: int(r, 1, 6),
      prompt: int(r, 10, 2000),
    });
  world.spanMs = Math.max(world.spanMs, pressTo);
  actions.splice(0, actions.length, ...kept);
}

/**
 * The batch class's objective in these worlds: minutes (a batch class's 2 min), so the half of it
 * a class behind a higher one may wait is past `queue_timeout_ms` and its slack.
 */
const HELD_BATCH_TTFT_MS = [30_000, 120_000] as const;
/** A small `queue_timeout_ms`: the interactive class's hold (it less 1 s) 0.5-2 s. */
const HELD_QUEUE_TIMEOUT_MS = [1500, 3000] as const;

/**
 * At one node, for 6-10 s, interactive requests (long prompts, 20-60 tokens) on adapters loaded
 * and unloaded in turn, into replicas of 4 running slots: their own load and the queues put them
 * past the interactive objective, so the gateway holds some at every moment. Batch requests on
 * the base model (short prompts: predicted within the gate, but behind the held interactive ones)
 * come during it, at the same node. No fault: the access check judges a request only when none
 * began or healed while it was decided.
 */
function heldBehindHigher(r: Random, world: WorldSettings, actions: Action[]): void {
  world.ttftSloMs = 1000;
  world.queueTimeoutMs = int(r, HELD_QUEUE_TIMEOUT_MS[0], HELD_QUEUE_TIMEOUT_MS[1]);
  world.maxNumSeqs = 4;
  world.sloClasses = [
    { name: 'interactive', ttft_ms: 1000, priority: 0 },
    { name: 'batch', ttft_ms: int(r, HELD_BATCH_TTFT_MS[0], HELD_BATCH_TTFT_MS[1]), priority: -1 },
  ];
  const kept = actions.filter((a) => a.kind === 'request');
  const node = int(r, 0, world.nodes - 1);
  const from = int(r, 0, 1000);
  const lastsMs = int(r, 6000, 10_000);
  for (let t = from; t < from + lastsMs; t += int(r, 100, 300))
    kept.push({
      at: t,
      kind: 'request',
      node,
      adapter: int(r, -1, world.adapters.length - 1),
      tokens: int(r, 20, 60),
      prompt: int(r, 1000, 2000),
      cls: 'interactive',
    });
  const batches = int(r, 2, 5);
  for (let i = 0; i < batches; i++)
    kept.push({
      at: from + int(r, 500, Math.max(500, lastsMs - 3000)),
      kind: 'request',
      node,
      adapter: -1,
      tokens: int(r, 1, 6),
      prompt: int(r, 10, 200),
      cls: 'batch',
    });
  world.spanMs = Math.max(world.spanMs, from + lastsMs);
  actions.splice(0, actions.length, ...kept);
}
