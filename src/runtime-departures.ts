/**
 * Replicas that leave the node: once per poll round, the superseded router configurations unused
 * for the lapse grace lapse (src/fleet/node-claim.ts), the store is told what this node claims
 * now (FleetStore.retainReplicas: when it changed, else every RETAIN_EVERY_MS), and what is kept
 * in this process of a replica that left goes: the one the store forgot, one the store's list no
 * longer names and no live configuration lists, and, without Redis (the store is this node's alone), one no live
 * configuration lists. Nothing of a replica goes while a request, a load, an unload, a trim or a
 * poll of this process is under way on it: it is tried again the next round.
 */
import { monotonic } from './clock';
import { stateKeyOf } from './config/redis-schema';
import { RecoveringFleetStore } from './fleet/redis/recovering-store';
import { LeaseHandle } from './lease';
import { forgetJoining } from './router/in-flight-here';
import type { FleetRuntime } from './runtime';

/**
 * The store is told this node's replicas when they changed, and otherwise at most this often:
 * that call is only its forget check then (a node's claims stay live by its heartbeat, and a
 * replica is forgotten a grace of `lease_max_age_ms` after the last claim, 10 minutes by default,
 * so up to 30 s later is nothing). Sent every round, it cost a store round trip a round and
 * moved every explored schedule of the simulation without configuration changes.
 */
export const RETAIN_EVERY_MS = 30_000;

export function wireDepartures(rt: FleetRuntime): void {
  const shared = rt.stateKey !== stateKeyOf(undefined);
  const every = rt.retainEveryMs ?? RETAIN_EVERY_MS;
  /** Replicas that left whose records could not go yet (something under way on them). */
  const pending = new Set<string>();
  /**
   * The replicas last told the store, and when (monotonic); undefined before the first round,
   * which takes the registrations' claims as told (each registration claims its replicas).
   */
  let told: { urls: string; at: number } | undefined;
  /** The store's last list read (a failed read keeps the one before). */
  let listedBefore = new Set<string>();
  /**
   * Replicas listed or claimed at some round and not dropped here since: each not listed now is
   * a candidate every round. Not only those gone from the list since the round before: one that
   * left the list while this node still claimed it (the state emptied, a runtime replaced on the
   * same state starting with no list) was kept then and, never listed again, never looked at
   * again (dst/process-audit.ts, seed 3126238).
   */
  const known = new Set<string>();
  // Without Redis, a replica this node left is polled no more (nobody else routes to it), unless a
  // request of this process is still on it: its polls renew that lease. Not polled, a request
  // longer than the grace lost its lease at lease_max_age_ms, and the store then forgot the
  // replica under it (a fresh record, the replica listed again, would count nothing of it).
  rt.poller.skips = (url) => rt.departed(url) && !rt.leasesOn(url);
  rt.poller.afterRound = async () => {
    const released = rt.claim.lapse(monotonic(rt.clock), rt.lapseGraceMs());
    if (released.length > 0) rt.claimChanged();
    let forgotten: string[] = [];
    const claimed = [...rt.claim.replicas.keys()];
    const urls = JSON.stringify([...claimed].sort());
    const now = monotonic(rt.clock);
    told ??= { urls, at: now };
    // Retired (a changed `redis` record), its list is stale: the successor adopted its
    // configurations and speaks for the node (one node id on the same state). Told, it dropped the
    // node's claims on what the successor registered since, whose own first round takes its list as
    // told: a grace under RETAIN_EVERY_MS later another node forgot those replicas under it.
    if (rt.successor === null && (urls !== told.urls || now - told.at >= every)) {
      try {
        forgotten = await rt.store.retainReplicas(claimed, rt.forgetGraceMs());
        told = { urls, at: now };
      } catch (err) {
        rt.log.warn(
          `could not tell the fleet state which replicas this node routes to: ${(err as Error).message}`,
        );
      }
    }
    const listedUrls = rt.poller.listedUrls();
    const listed = listedUrls ? new Set(listedUrls) : listedBefore;
    rt.claim.listed(listed);
    const candidates = new Set([...pending, ...forgotten, ...(shared ? [] : released)]);
    if (listedUrls) {
      for (const u of known) if (!listed.has(u)) candidates.add(u);
      // And each the work model names: shared with the runtime this one replaced on its state
      // (runtime.ts `passPolling`), it holds what that one polled while the state listed it, maybe
      // never listed here (the store forgot it between their rounds: simulation seed 3455548).
      for (const u of rt.work.urls()) if (!listed.has(u)) candidates.add(u);
    }
    listedBefore = listed;
    for (const u of listed) known.add(u);
    for (const u of claimed) known.add(u);
    const gone = new Set(forgotten);
    for (const url of candidates) {
      pending.delete(url);
      // Claimed again, or still in a shared fleet this node may be asked about: kept.
      if (rt.claim.claims(url) || (listed.has(url) && !gone.has(url) && !rt.departed(url))) continue;
      if (forgetReplica(rt, url)) known.delete(url);
      else pending.add(url);
    }
    // No configuration left here, live or within its grace: the registry may retire the runtime.
    const left = rt.claim.size;
    if (rt.successor === null && left.live === 0 && left.superseded === 0) rt.unclaimed?.();
  };
}

/** Drops every record this process keeps of `url`; false, and nothing dropped, while anything runs on it here. */
export function forgetReplica(rt: FleetRuntime, url: string): boolean {
  if (rt.poller.polling(url) || rt.leasesOn(url) || rt.pollTrim.busy(url)) return false;
  if (rt.store instanceof RecoveringFleetStore && rt.store.owesOn(url)) return false;
  if (!LeaseHandle.forgetReplica(rt, url) || !forgetJoining(rt, url)) return false;
  // Each refuses, dropping nothing of its own, while something of its own runs on the replica;
  // what the first dropped before a refusal is idle (the work model's figures come back with a request).
  if (!rt.work.forget(url) || !rt.manager.forgetReplica(url)) return false;
  rt.poller.forget(url);
  rt.api.forget?.(url);
  rt.metrics.forget(url);
  rt.prefetcher.demand.forget(url);
  if (rt.store instanceof RecoveringFleetStore) rt.store.forgetSeen(url);
  for (const fn of rt.replicaForgotten) fn(url);
  return true;
}
