/**
 * The log phase of a routed request: its lease goes back first, whatever instance or runtime
 * Kong runs it on, and Kong's own 502/504 marks the replica down at once. Nothing routes here.
 */
import { monotonic } from '../clock';
import { LeaseHandle } from '../lease';
import type { FleetRuntime } from '../runtime';
import type { Released } from '../fleet/types';
import type { Stage } from '../scheduler/types';

/** Kept in `kong.ctx.shared` from access to log: what the log phase needs, and what other plugins may read. */
export interface DecisionRecord {
  lease: string;
  replica: string;
  stage: Stage;
  adapter: string | null;
}

/**
 * Gives the request's in-flight lease back and records passive health, for any instance: the
 * log phase may run on an instance other than the one that routed (Kong replaced it on a config
 * change); the lease knows the runtime it was taken on.
 * It sees no TTFT (Kong's latencies.proxy is time to response headers, which vLLM streams at
 * once): the work model learns its rates from the replicas' histograms, through the poll.
 * Throws LeaseNotOpen if the lease was given back already. Answered in the call (no promise)
 * when the lease's store answers in the call and nothing is polled afresh. `served`: a request
 * ran there under it, the replica answered it (false: a guessed lease given back unused, a
 * request answered by Kong or a later plugin: `logPhase`), which the unseen hold of a poll
 * begun while its lease was open reads as this node's (ReplicaWord `servedEndedSince`).
 */
export function releaseLease(
  lease: LeaseHandle,
  status: number | undefined,
  served = true,
  endedMono?: number,
): void | Promise<void> {
  // A 404 is vLLM's "The model `x` does not exist." when it lost the adapter (a restart,
  // another router's unload; serving_engine.py `_check_model`, vLLM v0.11.0), or FastAPI's
  // `{"detail":"Not Found"}` for a client's mistyped path under /v1 (llama.cpp: "File Not
  // Found", tools/server/server-http.cpp, llama.cpp b7193 and b10573). The log phase has the status,
  // never the body (no `response` phase: docs/kong.md), so a 404 forgets nothing by itself:
  // the replica's registry, read afresh, decides.
  const lost = status === 404;
  // One store call: the release and passive health (5xx: the replica refused, reset or timed
  // out). Its work ends with it, whatever the store answers (an expired lease is gone there).
  // In process it is answered in the call: a served request's log phase then awaits nothing.
  const released = lease.releaseInCall(lost ? undefined : status);
  // Told in the call, as the count leaves the in-process store (or before the shared one hears):
  // a poll that read the adapter running, begun before now, reads this node's request (review 64).
  // Never of a request that did not reach the replica: that excused what someone unseen ran.
  if (served) servedEnded(lease, endedMono);
  if (released instanceof Promise) return releasedLater(lease, released, lost);
  return afterRelease(lease, released, lost);
}

/** To the runtime it was taken on and the one polling now (a `redis` record change replaced it). */
function servedEnded(lease: LeaseHandle, at: number | undefined): void {
  const { url, adapter } = lease.lease;
  if (adapter === null) return;
  lease.rt.manager.replicaWord.servedEnded(url, adapter, at, lease.openedMono);
  const now = lease.rt.current();
  if (now !== lease.rt) now.manager.replicaWord.servedEnded(url, adapter, at, lease.openedMono);
}

/** `releaseLease` on a store whose release is a round trip. */
async function releasedLater(
  lease: LeaseHandle,
  released: Promise<Released | undefined>,
  lost: boolean,
): Promise<void> {
  const after = afterRelease(lease, await released, lost);
  if (after) await after;
}

/** What a release leads to: requests waiting for room woken, a lost adapter's replica polled afresh. */
function afterRelease(
  lease: LeaseHandle,
  released: Released | undefined,
  lost: boolean,
): void | Promise<void> {
  if (!released) return;
  // Its adapter went idle there: it can now make room for a request waiting for a slot, on
  // the runtime it was taken on or the one deciding now.
  const now = lease.rt.current();
  if (released.adapterIdle) {
    lease.rt.manager.roomChanged.notify();
    if (now !== lease.rt) now.manager.roomChanged.notify();
  }
  // Polled afresh (after any poll under way, which may have read the registry before the
  // 404): the reconciliation forgets what the registry no longer lists, and only that.
  if (lost && released.adapter !== null) return now.poller.refreshUrl(released.url, true);
}

/**
 * The log phase of a routed request: its lease first (it knows the runtime it was taken on:
 * Kong may have replaced the instance and its config since, or a changed `redis` record the
 * runtime), nothing before it may keep it from going back (the answer's source is asked before,
 * but its failure is thrown only once the lease is back). Then Kong's own 502/504 (source
 * "error": no attempt got a response) marks the replica down at once, whatever became of the
 * lease (reclaimed by age, say): the answer is about the replica. A replica's own 5xx (source
 * "service") is left to passive health, which hears no 499 and no 5xx of a later plugin's. Kong/kong 3.9.3 kong/pdk/response.lua `get_source`,
 * kong/init.lua `Kong.handle_error`. Rejects with LeaseNotOpen when the lease is not open here
 * (given back already, reclaimed by age); `rt`, the instance's runtime (none: its configuration is
 * broken), then says where the replica is marked. No promise when nothing was waited for (the
 * in-process store, nothing asked of Kong): a log phase then takes no microtask turn of its own.
 */
export function logPhase(
  rt: FleetRuntime | null,
  record: DecisionRecord,
  status: number | undefined,
  source: () => Promise<unknown>,
): void | Promise<void> {
  // Asked before the release, which tells the unseen hold "a request of this node ended there"
  // only of one the replica answered ('service'): a later plugin's exit (proxy-cache's hit),
  // Kong's own error (the access phase failing after the decision, a refused connection) never
  // ran there, and a poll's reading of the adapter running is someone else's (review 64b).
  // Asked only where it tells something (a PDK round trip): a 5xx (whose answer it was decides
  // whether passive health counts it), or an adapter's request while a poll of its replica is
  // under way (no poll begun later reads the tell).
  const found = LeaseHandle.find(record.lease);
  const asked = failed(status) || (!gaveUp(status) && pollReading(found)) ? source() : undefined;
  // The request ended at the replica before its log phase began: told as ended now, before the
  // round trip, else a poll begun during it, which cannot have read it, was excused (review 64c).
  const endedMono = found ? monotonic(found.rt.clock) : undefined;
  // Nothing asked (not a 5xx: no marking follows either) and the lease open here: it goes back in
  // the call, and the log phase awaits nothing where its store answers in the call (in process).
  // Still a rejection, never a throw, whatever goes wrong.
  if (asked === undefined && found !== undefined)
    try {
      return releaseLease(found, replicaStatus(status, undefined), false, endedMono);
    } catch (err) {
      return Promise.reject(err as Error);
    }
  return releaseAsked(rt, record, status, asked, endedMono);
}

/** `logPhase` where something is awaited: Kong's word on the answer's source, or a lease not open here (its rejection). */
async function releaseAsked(
  rt: FleetRuntime | null,
  record: DecisionRecord,
  status: number | undefined,
  asked: Promise<unknown> | undefined,
  endedMono: number | undefined,
): Promise<void> {
  // A failure to ask keeps nothing from going back: no tell (the safe side), thrown after the lease for a 502/504.
  const from = await asked?.catch(() => undefined);
  const lease = LeaseHandle.find(record.lease);
  try {
    // Only an answer asked of Kong tells: a 499's never is (`asked`).
    const served = from === 'service';
    const released = releaseLease(
      lease ?? LeaseHandle.open(record.lease),
      replicaStatus(status, from),
      served,
      endedMono,
    );
    if (released) await released;
  } finally {
    const on = lease?.rt ?? rt;
    if (on && kongOwnStatus(status) && (await asked) === 'error')
      await proxyFailed(on.current(), record.replica, status);
  }
}

/** A status passive health counts against the replica (5xx), when the replica's. */
function failed(status: number | undefined): status is number {
  return status !== undefined && status >= 500;
}

/**
 * The status passive health hears (undefined: none, the count left as it is): not a 499, which
 * says the client gave up, nothing of the replica; not a 5xx the replica did not answer: a later
 * plugin's exit (request-termination's 503 in maintenance: three in a row took a healthy replica
 * out) or Kong's own error other than its 502/504, which do say the replica could not be reached.
 * A source not known (the call failed) counts, as before it was asked. A later plugin's 2xx-4xx
 * still counts as an answer (asking every request's source is a PDK round trip on the hot path).
 */
function replicaStatus(status: number | undefined, from: unknown): number | undefined {
  if (gaveUp(status)) return undefined;
  if (!failed(status) || from === undefined || from === 'service') return status;
  return kongOwnStatus(status) && from === 'error' ? status : undefined;
}

/** Whether a poll of the lease's replica is under way where its end is told (`servedEnded`). */
function pollReading(lease: LeaseHandle | undefined): boolean {
  if (!lease || lease.lease.adapter === null) return false;
  const url = lease.lease.url;
  return lease.rt.poller.polling(url) || lease.rt.current().poller.polling(url);
}

/**
 * nginx's "client closed request": the client gave up, maybe before the request reached the
 * replica. Kong leaves `lua_check_client_abort` off, so a client gone during the access phase (a
 * wait for room, an adapter's load) is found gone only once proxying began (nginx
 * ngx_http_upstream_check_broken_connection), which may close the upstream connection before the
 * request was written; Kong set KONG_PROXIED before the balancer and no error_page covers 499
 * (Kong/kong 3.9.3 kong/init.lua `Kong.access`, kong/templates/nginx_kong.lua), so `get_source`
 * says 'service'. Never told as served (the safe side: a poll holds what it read, 2 s).
 */
function gaveUp(status: number | undefined): boolean {
  return status === 499;
}

/**
 * A status Kong answers itself when no attempt got a response (502: refused, reset; 504: timed
 * out); `kong.response.get_source()` then says 'error', and 'service' for a replica's own.
 */
export function kongOwnStatus(status: number | undefined): status is 502 | 504 {
  return status === 502 || status === 504;
}

/**
 * Kong could not proxy a routed request to `url` (its own 502 or 504: connection refused or
 * reset, a timeout, every retry spent): down for routing now, as a failed poll marks it, so
 * the next requests go elsewhere; the next poll that reaches it brings it back.
 */
export async function proxyFailed(rt: FleetRuntime, url: string, status: number): Promise<void> {
  const at = rt.clock.now();
  // On the monotonic clock too: a node deciding alone hands the marking on later, dated by the
  // time since (seen-down.ts), which a wall clock stepped meanwhile moved by the step (review 64b).
  const mono = monotonic(rt.clock);
  await rt.store.applySnapshot(url, {
    at,
    startedAt: at,
    monoStartedAt: mono,
    monoAt: mono,
    startedOnArrival: true,
    ok: false,
    error: `Kong could not proxy to it (${status})`,
  });
}
