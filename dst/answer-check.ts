/**
 * "A request proxied to a replica for an adapter finds it there", read off what the replica
 * answered the proxied request (vLLM's 404 "The model `X` does not exist.", its serving_engine
 * `_check_model`, v0.11.0; sim/http/backends.ts), never from the router's counters. The router
 * proxies a request to a replica only once it believes the adapter resident there; a replica
 * that answers it does not serve the adapter shows a belief that was wrong: a load the router
 * counted as landed that did not land, an unload it missed. Each answer so is a violation unless
 * what took the adapter away is a behaviour docs/reliability.md allows:
 * - the replica restarted since the adapter landed and forgot it ("A replica restart": only the
 *   requests routed to it meanwhile fail; the log phase re-reads its registry after the 404);
 * - an unload by a node deciding alone, or under requests that were an unseen router's first
 *   there: the excuses "no unload of a busy adapter" allows (dst/invariants.ts `sentAlone`);
 * - an unload recorded in a shared state that was then rolled back (a Redis restart from an
 *   older snapshot, a Sentinel switch that lost writes: docs/reliability.md leaves such a
 *   rollback not covered), the request decided on that state after: the state brought the
 *   adapter back as loaded there until a poll reads the replica again (seed 65 of
 *   test/reliability/dst-found/burst-loads.test.ts: `sql` unloaded at 4,175 ms, Redis restarted at
 *   5,266 ms from its first snapshot since a switch, a request decided at 6,507 ms on views of 2,062 ms).
 *   The record begins when the store grants the unload, which may be before the replica drops
 *   the adapter (seed 539094: granted at 1,763 ms, lost by a switch, dropped at 1,769 ms). Only
 *   another process's unload: the process that sent it knows it without Redis and keeps its
 *   decisions off it (src/adapters/own-unloads.ts; seed 741908: FLUSHALL between the grant and the
 *   drop, node 1 routed onto its own unload);
 * - the request routed by a node deciding alone: "each node decides from its own state"
 *   (docs/reliability.md, outages and recovery), which never saw an unload made through Redis,
 *   another node's or its own (seeds 10284, 11456: Redis emptied, the request's lease failed to
 *   reach it, its node decided alone on its view of before the unload; 10282: the node's own
 *   unload, sent while it shared Redis; 19796: alone while it decided, back on Redis by the
 *   proxy, so "alone" is its store local after any step since the request came).
 * - the request's process died before the unload's grant, and its state was wiped or rolled back
 *   since the request was sent (its lease gone with no living process to take it again: each node
 *   takes only its own leases again after an emptied state, docs/reliability.md): the replica
 *   answers a connection Kong closed with the process, to no client. The busy check's `onTheWay`
 *   counts no dead process's request either. Seed 3240387: node 0 proxied `a` at 4,662 ms over a
 *   slow path (2.4 s), died at 4,748 ms, FLUSHALL at 4,763 ms, node 1's unload granted at 6,937 ms;
 * - an unload sent on another shared state than the request's lease (a `redis` record change to
 *   other state reaching the nodes in turn, docs/reliability.md: not covered; the busy check's
 *   `onTheWay` leaves such leases out, seed 638713): seed 30333, `code` unloaded by a node moved
 *   to db 1, a node still on db 0 routed to it 49 ms later.
 * An adapter never on the replica, or unloaded otherwise (by a router sharing Redis, the request
 * decided on Redis), or registered there when the replica said otherwise, is not excused.
 */
import type { AdapterLogEntry } from '../sim/http/replica';
import type { RestartLoss } from './registry-loss';

/** vLLM's answer to a request for a model it does not serve (`_check_model`'s 404). */
export function modelNotFound(status: number, text: string, model: string): boolean {
  return status === 404 && text.includes(`The model \`${model}\` does not exist.`);
}

/** What last happened to `name` on a replica before a time: landed, unloaded, lost to a restart, or never there. */
export type LastWord =
  | { kind: 'landed'; at: number }
  | { kind: 'unloaded'; at: number }
  | { kind: 'lost'; at: number }
  | { kind: 'never' };

/**
 * The last change to `name`'s registration on the replica at or before `by`, from its own log (a
 * load answered 200 registered it, an unload answered 200 dropped it: the simulator changes its
 * registry as it answers) and its restarts that forgot it.
 */
export function lastWord(
  name: string,
  by: number,
  log: readonly AdapterLogEntry[],
  restarts: readonly RestartLoss[],
): LastWord {
  let last: LastWord = { kind: 'never' };
  const later = (at: number) => last.kind === 'never' || at >= last.at;
  for (const e of log) {
    if (e.at > by) break;
    if (e.name !== name || e.status !== 200) continue;
    if (later(e.at)) last = { kind: e.op === 'load' ? 'landed' : 'unloaded', at: e.at };
  }
  for (const r of restarts)
    if (r.at <= by && (r.names?.includes(name) ?? true) && later(r.at)) last = { kind: 'lost', at: r.at };
  return last;
}

/** A proxied request the replica answered with the model check's 404. */
export interface NotFoundAnswer {
  url: string;
  name: string;
  /** The process that routed it (`n<node>g<gen>`). */
  proc: string;
  /** When Kong proxied it, and when it reached the replica (the model check ran then). */
  sentAt: number;
  reachedAt: number;
  /** The shared state (database) its lease is on. */
  db: number;
  /** Its router decided alone (its store cut off from Redis) when it proxied it. */
  alone: boolean;
  /** When the process that routed it died (undefined: alive when the replica answered). */
  diedAt?: number;
}

/** What the judgement reads of the world. */
export interface AnswerGround {
  log(url: string): readonly AdapterLogEntry[];
  restarts(url: string): readonly RestartLoss[];
  /** Whether the last unload of `name` on `url` is excused from (i) (World's `sentAlone`). */
  unloadExcused(url: string, name: string): boolean;
  /** The process (`n<node>g<gen>`) that sent the last unload of `name` on `url`, and the shared state it was on. */
  unloader(url: string, name: string): { proc: string; db: number; grantAnsweredAt?: number } | undefined;
  /**
   * When shared state `db` was rolled back to an older copy or wiped (RedisModel.resets): either
   * loses an unload's record (seed 741908: FLUSHALL between the grant and the replica's drop).
   */
  rolledBack(db: number): readonly number[];
}

/** Why `a` breaks the invariant (undefined: it does not, or an allowed behaviour explains it). */
export function notFoundUnexcused(a: NotFoundAnswer, g: AnswerGround): string | undefined {
  const last = lastWord(a.name, a.reachedAt, g.log(a.url), g.restarts(a.url));
  const head = `${a.name} proxied by ${a.proc} at ${Math.round(a.sentAt)} ms, answered 404 by ${a.url}`;
  switch (last.kind) {
    case 'lost':
      return undefined;
    case 'unloaded': {
      if (g.unloadExcused(a.url, a.name)) return undefined;
      // Its router decided alone, from its own state: an unload through Redis never reached it.
      if (a.alone) return undefined;
      const u = g.unloader(a.url, a.name);
      // Sent on another shared state (a record change to other state under way): the request's state never saw it.
      if (u !== undefined && u.db !== a.db) return undefined;
      // The unload's state rolled back or was wiped after its grant (which may come before the
      // replica dropped the adapter: seeds 539094, 741908), and the request decided on it since.
      // Not when the process that routed it sent that unload: it knows its own unload regardless of
      // Redis (src/adapters/own-unloads.ts; seed 741908, node 1 decided onto its own unload).
      const recorded = u?.grantAnsweredAt ?? last.at;
      const restored =
        u?.db === a.db && u.proc !== a.proc && g.rolledBack(a.db).some((t) => t > recorded && t <= a.sentAt);
      if (restored) return undefined;
      // Its lease lost to a wipe or rollback of its state after it was sent, its process dead before
      // the unload's grant: only that process takes its leases again (docs/reliability.md, "Every node
      // notices an emptied Redis"), and the replica answers a connection Kong closed with it, to no
      // client (seed 3240387: node down, then FLUSHALL, the request on a slow path for 2.4 s).
      const orphaned =
        u?.db === a.db &&
        a.diedAt !== undefined &&
        a.diedAt <= recorded &&
        g.rolledBack(a.db).some((t) => t > a.sentAt && t <= recorded);
      return orphaned ? undefined : `${head}: unloaded there at ${Math.round(last.at)} ms`;
    }
    case 'landed':
      return `${head}: registered there since ${Math.round(last.at)} ms (the model check and the log disagree)`;
    case 'never':
      return `${head}: never loaded there`;
  }
}
