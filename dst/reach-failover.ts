/**
 * Shapes for two failover fixes that had real-Redis tests only (test/core/failover-leftovers.test.ts),
 * reached by no drawn schedule (2026-12-06), each from a stream of its own, drawn in dst/reach.ts
 * after its other shapes (the seeds with those keep them):
 *
 * - a lock end owed to the old state by a runtime retired for other state (failover-store.ts
 *   `leave`): judged by dst/owed-ends-check.ts;
 * - a registration the shared state is emptied under in each pass (recovering-store.ts
 *   `registerReplicas`): judged by dst/registration-passes.ts.
 */
import type { Random } from '../src/random';
import { int } from './draws';
import type { Action, WorldSettings } from './schedule';
import { NODE_TTL_MS } from './world-timings';

/**
 * Node 0 (Kong pushes a `redis` record to node 0 first) asks for a cold adapter; once its load
 * lock is granted, just before the load lands, node 0's link to Redis is cut, so the load's end
 * is owed to the state. The link heals once node 0's one short request ended (its decision did not
 * wait for the end), and the record changes to other state at once, before node 0's probe (every
 * second) finds Redis again: its old store leaves with the end still owed (a probe's recovery would
 * send it). The other nodes stay on the old state for seconds (a long gap between pushes), within
 * the load lock's TTL (load_timeout_ms and its 5 s margin). node_ttl_ms is the default 2 s, and the
 * link is cut for under one: a node silent for longer has its locks ended by its peers (the
 * `expire` script), so nothing is owed (with 500 ms, or a longer cut, 10 of the 12 schedules with
 * the shape in seeds 1-600 missed). Other faults would excuse the check: left out; the other
 * nodes' requests stay.
 */
export function owedEndOnMove(r: Random, world: WorldSettings, actions: Action[]): void {
  const kept: Action[] = actions.filter((a) => a.kind === 'request' && a.node !== 0);
  const adapter = int(r, 0, world.adapters.length - 1);
  const at = int(r, 0, 300);
  kept.push({ at, kind: 'request', node: 0, adapter, tokens: 1, prompt: int(r, 10, 500) });
  world.nodeTtlMs = NODE_TTL_MS;
  // The load call goes out a few trips after the request came, and lands loadMs later.
  const cutAt = at + world.loadMs - int(r, 0, Math.min(100, world.loadMs - 60));
  // Past the end call's timeout and the request's last token.
  const healAt = at + world.loadMs + int(r, 900, 1100);
  const moveAt = healAt + int(r, 1, 40);
  kept.push(
    { at: cutAt, kind: 'partition', node: 0, ms: healAt - cutAt },
    { at: moveAt, kind: 'record-change', otherState: true, gapMs: int(r, 2500, 4000) },
  );
  world.spanMs = Math.max(world.spanMs, moveAt + 3000);
  actions.splice(0, actions.length, ...kept);
}

/**
 * A FLUSHALL every few ms for a while: a registration (a reclaim after the emptied state, or a
 * recovery) finds the state emptied between its writes in each pass. Requests at every node
 * during it read the emptied state. Other faults left out.
 */
export function emptiedEachPass(r: Random, world: WorldSettings, actions: Action[]): void {
  const kept: Action[] = actions.filter((a) => a.kind === 'request');
  const from = int(r, 200, 1200);
  const lastsMs = int(r, 30, 300);
  for (let t = from; t < from + lastsMs; t += int(r, 1, 4)) kept.push({ at: t, kind: 'flushall' });
  for (let node = 0; node < world.nodes; node++)
    kept.push({
      at: from + int(r, 0, lastsMs),
      kind: 'request',
      node,
      adapter: int(r, -1, world.adapters.length - 1),
      tokens: int(r, 1, 6),
      prompt: int(r, 10, 2000),
    });
  world.spanMs = Math.max(world.spanMs, from + lastsMs + 1000);
  actions.splice(0, actions.length, ...kept);
}
