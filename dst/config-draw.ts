/**
 * Router configuration changes (Kong's `__plugin_id` kept, a higher `__seq__`, another subset of
 * the replicas listed), drawn from a stream of their own so every seed without them keeps its
 * world and schedule (dst/schedule.ts), and only when asked (`ScheduleOptions.configChanges`: the
 * CLI's default; the seeds tests replay by number were found without them). A replica leaves the
 * configurations of one node or of every node, and may come back later, also once it was
 * forgotten; it keeps running meanwhile. node-processes.ts plays a change, request-routing.ts a
 * worker still on the previous configuration, dst/forget-check.ts judges what the store forgot.
 */
import { seededRandom, type Random } from '../src/random';
import { int } from './draws';
import type { Action, WorldSettings } from './schedule';
import { NODE_TTL_MS } from './world-timings';

/** What a world with configuration changes sets. */
export interface ConfigChangeDraw {
  /**
   * How often a node tells the store its claims when they did not change (RuntimeOptions
   * `retainEveryMs`, 30 s by default): each call is also the store's forget check. Shorter here, so
   * the checks run within a schedule's span, often beside requests, loads and unloads; the guards
   * that make forgetting safe are inside the check, whenever it runs. One past the grace too (a
   * claim dropped by another node's call stays dropped until its node's next retain).
   */
  retainEveryMs: number;
  /**
   * How long after a change a worker may still route on the previous configuration (Kong's workers
   * rebuild their plugins iterator each on its own: `worker_state_update_frequency`, 5 s by default).
   */
  staleMs: number;
  /**
   * The nodes' lora-poller is a plugin of its own (absent: none; its own `__plugin_id` and
   * `__seq__`): on the router's record, or with `timeout` 1 on one differing in timeout only (same
   * state, another record: it replaces the router's runtime there). After a record change or a
   * move of the router it follows `lagMs` later, or never (no `lagMs`): the node's two plugins sit
   * on different records meanwhile (test/core/review-left.test.ts's case).
   */
  poller?: { lagMs?: number; timeout: 0 | 1 };
  /**
   * Moves drawn (absent: none): the replicas (indices) only a node's router moved to the other
   * state lists; every other configuration lists the others only (the `move` actions).
   */
  move?: { away: number[] };
}

/** Of the seeds with changes, those with a node down past node_ttl_ms and the store's grace. */
const NODE_DOWN_SHARE = 0.3;
/** The share of all seeds (quiet ones too) that draw configuration changes, when asked. */
export const CONFIG_CHANGE_SHARE = 0.15;
/**
 * Around and past the lapse of a superseded configuration (src/fleet/node-claim.ts MIN_LAPSE_MS,
 * kong-pdk's 60 s idle instance expiry) and the store's grace after it: a replica that comes back
 * this late comes back as it is forgotten, or forgotten.
 */
const COME_BACK_AFTER_MS = [62_000, 80_000] as const;

/** Adds configuration changes to a share of the seeds (`actions` as drawn so far, in their order). */
export function drawConfigChanges(seed: number, world: WorldSettings, actions: Action[]): void {
  const r = seededRandom(seed * 2654435761 + 16);
  if (r() >= CONFIG_CHANGE_SHARE) return;
  world.configChanges = { retainEveryMs: [1000, 3000, 10_000][int(r, 0, 2)]!, staleMs: int(r, 0, 3000) };
  // Every draw made for every request, so one request's draws never move another's.
  for (const a of actions) {
    if (a.kind !== 'request') continue;
    const old = r() < 0.5;
    if (old) a.onOldConfig = true;
  }
  const changes = int(r, 1, 3);
  const span = world.spanMs;
  let last = 0;
  for (let i = 0; i < changes; i++) {
    const at = int(r, 0, span);
    last = Math.max(last, at);
    actions.push(...change(r, world, at));
  }
  // Now and then every replica back on every node once past the lapse and grace: a replica
  // forgotten comes back (its adapters may still be loaded there), and requests press on it.
  if (r() < 0.5) {
    const back = last + int(r, COME_BACK_AFTER_MS[0], COME_BACK_AFTER_MS[1]);
    const all = Array.from({ length: world.replicas }, (_, i) => i);
    for (let n = 0; n < world.nodes; n++)
      actions.push({ at: back, kind: 'config-change', node: n, replicas: all });
    const requestable = world.adapters.length + (world.staticAdapters?.length ?? 0);
    const pressing = int(r, 2, 2 * world.maxLoadedAdapters * world.replicas + 2);
    for (let i = 0; i < pressing; i++)
      actions.push({
        at: back + int(r, 0, 3000),
        kind: 'request',
        node: int(r, 0, world.nodes - 1),
        adapter: int(r, -1, requestable - 1),
        tokens: r() < 0.2 ? int(r, 20, 60) : int(r, 1, 6),
        prompt: int(r, 10, 2000),
      });
  }
  // Now and then a node down past node_ttl_ms and the grace: its claims lapse, the replicas only it
  // lists may be forgotten; back, it registers (claims) them again.
  if (r() < NODE_DOWN_SHARE) {
    const ttl = world.nodeTtlMs ?? NODE_TTL_MS;
    const past = Math.max(ttl, world.leaseMaxAgeMs) + ttl;
    actions.push({
      at: int(r, 0, span),
      kind: 'node-down',
      node: int(r, 0, world.nodes - 1),
      ms: int(r, past + 500, past + 6000),
    });
  }
}

/** Of the seeds with changes, those whose lora-poller is a plugin of its own. */
const POLLER_SHARE = 0.5;
/** Of those that follow the router's record, the rest never follow. */
const POLLER_FOLLOWS_SHARE = 0.75;
/** Of the seeds with changes (two replicas at least), those where one node's router moves. */
const MOVE_SHARE = 0.4;
/** Of those, the moves back to the other replicas; half of them past the grace (the left runtime retired). */
const MOVE_BACK_SHARE = 0.6;

/**
 * The lora-poller as a plugin of its own, and a node's router moving to the other state's
 * replicas and maybe back (from a stream of their own: the seeds' other draws stay). A move lists
 * replicas no other configuration lists (the last one, `move.away`): every configuration change
 * lists the others only, and none of the moved node's is drawn while it is away (two states
 * routing one replica outside a record change's span is no configuration the router supports).
 */
export function drawRecordPlugins(seed: number, world: WorldSettings, actions: Action[]): void {
  const cc = world.configChanges;
  if (!cc) return;
  // +19: +17 is the clients' draws' (dst/client-draw.ts), +18 the replicas' timeout notices.
  const r = seededRandom(seed * 2654435761 + 19);
  if (r() < POLLER_SHARE)
    cc.poller = {
      ...(r() < POLLER_FOLLOWS_SHARE ? { lagMs: int(r, 0, 3000) } : {}),
      timeout: r() < 0.5 ? 0 : 1,
    };
  if (world.replicas < 2 || r() >= MOVE_SHARE) return;
  const away = [world.replicas - 1];
  const home = Array.from({ length: world.replicas - 1 }, (_, i) => i);
  cc.move = { away };
  const node = int(r, 0, world.nodes - 1);
  const at = int(r, 0, world.spanMs);
  const back =
    r() < MOVE_BACK_SHARE
      ? at + (r() < 0.5 ? int(r, 500, 3000) : int(r, COME_BACK_AFTER_MS[0], COME_BACK_AFTER_MS[1]))
      : Infinity;
  for (let i = actions.length - 1; i >= 0; i--) {
    const a = actions[i]!;
    if (a.kind !== 'config-change') continue;
    if (a.node === node && a.at >= at && a.at <= back) {
      actions.splice(i, 1);
      continue;
    }
    a.replicas = a.replicas.filter((x) => home.includes(x));
    if (a.replicas.length === 0) a.replicas = [home[int(r, 0, home.length - 1)]!];
  }
  actions.push({ at, kind: 'move', node, replicas: away });
  if (back === Infinity) return;
  // Back to the first state, maybe with other replicas than it left there.
  const listed = home.filter(() => r() < 0.6);
  if (listed.length === 0) listed.push(home[int(r, 0, home.length - 1)]!);
  actions.push({ at: back, kind: 'move', node, replicas: listed });
}

/** One change: to one node, or to every node in turn (Kong's push reaching each a little apart). */
function change(r: Random, world: WorldSettings, at: number): Action[] {
  // A non-empty subset (the schema asks for one replica at least).
  const listed: number[] = [];
  for (let i = 0; i < world.replicas; i++) if (r() < 0.6) listed.push(i);
  if (listed.length === 0) listed.push(int(r, 0, world.replicas - 1));
  const everyNode = r() < 0.6;
  const node = int(r, 0, world.nodes - 1);
  if (!everyNode) return [{ at, kind: 'config-change', node, replicas: listed }];
  const out: Action[] = [];
  for (let n = 0; n < world.nodes; n++)
    out.push({ at: at + int(r, 0, 500), kind: 'config-change', node: n, replicas: listed });
  return out;
}
