/**
 * Admission: the lease taken on the decision's replica, the adapter made sure of under it (a load,
 * a wait for room), a fresh lease when a slow load let the old one age past what a store's sweep
 * may reclaim, and the proxied request shaped. Apart from the service (router.ts) because this is
 * where "an adapter is never unloaded under a request" is kept for the request path: from the
 * lease's taking to the answer, every failure gives it back.
 */
import type { Resolved } from '../adapters/catalog';
import { PlacedElsewhere } from '../adapters/claims';
import type { AdapterPolicy } from '../adapters/manager';
import type { RouterConfig } from '../config/router-schema';
import { errors } from '../errors';
import type { ResidencyState, ResidentAdapter } from '../fleet/types';
import { LeaseHandle } from '../lease';
import type { FleetRuntime } from '../runtime';
import type { Decision } from '../scheduler/types';
import type { TokenEstimate } from '../work/estimate';
import { DEFAULT_MAX_TOKENS } from '../work/work-model';
import { takeLease, type GuessedLease, type LastReplicas, type Taken } from './guessed-lease';
import type { RouteOutcome } from './outcome';
import { SeenDown } from './placement';
import { withPolledHealth } from './polled-health';
import { vllmPriority, withVllmPriority } from './engine-priority';
import { llamaBody, type targetOf } from './proxied-request';
import type { ParsedBody } from './request';
import { WaitingLease } from './waiting-lease';

/**
 * Fresh leases one admission may take after waits longer than half `lease_max_age_ms` (each wait
 * an unload met and the adapter loaded again): past them, 503 and the client retries.
 */
const RETAKES = 4;

/** What admission reads of its router configuration. */
export interface AdmissionSetup {
  config: RouterConfig;
  adapterPolicy: AdapterPolicy;
  /** Where Kong's set_target points for each replica. */
  targets: ReadonlyMap<string, ReturnType<typeof targetOf>>;
  /** Per adapter: the replica its last request was admitted on (the next one's guessed lease). */
  lastReplica: LastReplicas;
}

/**
 * Whether `lease` is old enough that a store's expiry sweep may have reclaimed it: past half of
 * `lease_max_age_ms` (this node's clock against Redis's: half leaves room for any skew the
 * store's own age allows).
 */
function mayBeReclaimed(rt: FleetRuntime, lease: LeaseHandle, config: RouterConfig): boolean {
  return rt.clock.now() - lease.lease.at >= config.lease_max_age_ms / 2;
}

/** What admission is told of the request's waits (see `admit`). */
export interface AdmissionWait {
  queueMs: number;
  until: number;
  /** The request's class priority (src/router/slo-class.ts; 0 without one): vLLM's `priority` field. */
  priority?: number;
  recheckPlacement?: () => Promise<string>;
  placeHere?: () => Promise<string>;
}

/**
 * Takes the lease, makes sure the adapter is there, and shapes the proxied request. In the call
 * (no promise) when nothing is to wait for: the lease needs no round trip (an in-process store,
 * or the guessed lease) and the adapter is there under it. That is a resident adapter's request,
 * the common one; in the plugin server each async step is paid cache-cold (docs/benchmarks.md).
 */
export function admit(
  setup: AdmissionSetup,
  rt: FleetRuntime,
  decision: Decision,
  resolved: Resolved,
  /** The request's body, parsed and its text. */
  body: ParsedBody,
  victimCost: ((v: ResidentAdapter) => number) | undefined,
  /**
   * How long the load may wait for room, when the access phase must be over, the placement's check
   * after a wait, and (a decision on a holder, which claimed none) the placement's claim before a load.
   */
  wait: AdmissionWait,
  spend: () => Promise<void>,
  tokens: TokenEstimate | undefined,
  guess: GuessedLease,
): RouteOutcome | Promise<RouteOutcome> {
  const replica = decision.replica;
  const adapterName = resolved.kind === 'base' ? null : resolved.adapter.name;
  // Taken on the decision's runtime, and given back there whatever happens meanwhile.
  const taken = takeLease(rt, replica.url, adapterName, guess);
  // A fresh lease is one a sweep may reclaim only with `lease_max_age_ms` 0: `admitWithWaits` then.
  if (
    taken instanceof Promise ||
    (resolved.kind === 'on-demand' && absent(stateUnder(replica, taken.state))) ||
    mayBeReclaimed(rt, taken.lease, setup.config)
  )
    return admitWithWaits(setup, rt, decision, resolved, body, victimCost, wait, spend, tokens, taken);
  const lease = taken.lease;
  try {
    admitWork(rt, replica, tokens, lease.id, 0, wait.priority);
    return admitted(setup, rt, decision, lease, adapterName, body, wait.priority);
  } catch (err) {
    // As `admitWithWaits`: given back before the failure is answered.
    const released = lease.releaseInCall();
    if (released instanceof Promise)
      return released.then(() => {
        throw err;
      });
    throw err;
  }
}

/** The adapter's state under the lease, not the decision's: an unload may have begun since the views. */
function stateUnder(
  replica: Decision['replica'],
  held: ResidencyState | undefined,
): ResidencyState | undefined {
  return replica.backend === 'vllm' ? held : replica.adapter?.state;
}

/** Whether an on-demand adapter in `state` under the lease must be loaded (or waited for). */
function absent(state: ResidencyState | undefined): boolean {
  return state !== 'loaded' && state !== 'static';
}

/**
 * Admitted to the work model before the load: requests decided from now on queue behind it
 * (not those decided in the same instant: docs/routing.md, "Known limit").
 */
function admitWork(
  rt: FleetRuntime,
  replica: Decision['replica'],
  tokens: TokenEstimate | undefined,
  id: string,
  startMs: number,
  priority: number | undefined,
): void {
  if (tokens && rt.predictsWork)
    rt.work.admit({
      id,
      url: replica.url,
      promptTokens: tokens.promptTokens,
      maxTokens: tokens.maxTokens ?? DEFAULT_MAX_TOKENS,
      at: rt.clock.now(),
      startMs,
      cachedTokens: replica.cachedTokens,
      priority: priority ?? 0,
    });
}

/**
 * `admit` where something is waited for: the lease's round trip, the adapter's load or a wait for
 * room under it, a fresh lease after a long wait.
 */
async function admitWithWaits(
  setup: AdmissionSetup,
  rt: FleetRuntime,
  decision: Decision,
  resolved: Resolved,
  body: ParsedBody,
  victimCost: ((v: ResidentAdapter) => number) | undefined,
  wait: AdmissionWait,
  spend: () => Promise<void>,
  tokens: TokenEstimate | undefined,
  taken: Taken | Promise<Taken>,
): Promise<RouteOutcome> {
  const replica = decision.replica;
  const adapterName = resolved.kind === 'base' ? null : resolved.adapter.name;
  let { lease, state: held } = taken instanceof Promise ? await taken : taken;
  // From here on, any failure gives the lease back before it is answered.
  try {
    for (let round = 0; ; round++) {
      const state = stateUnder(replica, held);
      const load = resolved.kind === 'on-demand' && absent(state);
      if (round === 0)
        admitWork(
          rt,
          replica,
          tokens,
          lease.id,
          load && adapterName !== null ? rt.loadTimes.load(adapterName) : 0,
          wait.priority,
        );
      if (load) {
        const adapter = resolved.adapter;
        // Decided on a holder, no placement claimed: gone or going under the lease (another node
        // unloads it), the load is a cold one and follows another node's placement made meanwhile
        // (seed 1004317). Another's load under way is waited for: a load after it claims then.
        const recheckPlacement = wait.recheckPlacement ?? wait.placeHere;
        if (wait.placeHere && state !== 'loading') {
          const placedOn = await wait.placeHere();
          if (placedOn !== replica.url) throw new PlacedElsewhere(adapter.name, placedOn);
        }
        // Kept young while it waits: the load made for it must land under a lease (seed 1251595).
        const waiting = new WaitingLease(rt, lease, setup.config.lease_max_age_ms, (fresh) =>
          admitWork(rt, replica, tokens, fresh.id, 0, wait.priority),
        );
        const policy = {
          ...setup.adapterPolicy,
          queueTimeoutMs: wait.queueMs,
          deadline: wait.until,
          keepLease: () => waiting.keep(),
          ...(recheckPlacement ? { recheckPlacement } : {}),
        };
        try {
          await rt.manager.ensure(replica.url, adapter, policy, victimCost, spend);
        } finally {
          // A fresh lease still being taken (asked by a load whose wait this request gave up) is the one.
          const renewing = waiting.renewing;
          if (renewing) await renewing;
          lease = waiting.current;
        }
        // The load (or its wait for room) took time: a replica seen down meanwhile gets no request.
        // Nor does one decided down (every replica was: the health filter failed open) once another
        // is seen up meanwhile (seed 317260); while every one still is, it stays the decision.
        const urls = replica.health === 'down' ? [...setup.targets.keys()] : [replica.url];
        const now = await withPolledHealth(rt, await rt.store.views(urls, undefined, false));
        const here = now.find((v) => v.url === replica.url);
        const elsewhere = replica.health !== 'down' || now.some((v) => v.health !== 'down');
        if (here?.health === 'down' && elsewhere) throw new SeenDown(replica.url);
      }
      if (!mayBeReclaimed(rt, lease, setup.config)) break;
      if (round >= RETAKES)
        throw errors.noRoom(
          adapterName ?? 'base',
          replica.url,
          1,
          'it was unloaded each time it was about to be used',
        );
      // Waited so long that an expiry sweep may have reclaimed the lease (a load slower than
      // lease_max_age_ms): a fresh one, taken before the old goes back so one always holds the
      // adapter, with the state under it; an unload begun meanwhile is waited out and the
      // adapter loaded again, as for any request (seed 102923).
      const fresh = await LeaseHandle.take(rt, replica.url, adapterName);
      const old = lease;
      ({ lease, state: held } = fresh);
      await old.release();
      admitWork(rt, replica, tokens, lease.id, 0, wait.priority);
    }
    return admitted(setup, rt, decision, lease, adapterName, body, wait.priority);
  } catch (err) {
    // Not releaseLease (log-phase.ts): that also wakes the requests waiting for room when the
    // adapter went idle, which changes how escalated requests retry (measured in every
    // routing figure where admissions fail); a change of behaviour for its own issue.
    await lease.release();
    throw err;
  }
}

/** The request admitted on its lease: remembered, counted, and the proxied request shaped. */
function admitted(
  setup: AdmissionSetup,
  rt: FleetRuntime,
  decision: Decision,
  lease: LeaseHandle,
  adapterName: string | null,
  body: ParsedBody,
  priority: number | undefined,
): RouteOutcome {
  const replica = decision.replica;
  if (rt.store.mode) setup.lastReplica.remember(adapterName, replica.url);
  rt.metrics.decided(decision.stage);
  rt.metrics.recent.record('requests', rt.clock.now());
  const target = setup.targets.get(replica.url)!;
  return {
    kind: 'proxy',
    url: replica.url,
    host: target.host,
    port: target.port,
    https: target.https,
    leaseId: lease.id,
    stage: decision.stage,
    adapter: adapterName,
    body: !body.json
      ? undefined
      : replica.backend === 'llamacpp'
        ? llamaBody(body.json, body.text, replica.adapter?.llamaId, replica.llamaIds ?? [])
        : setup.config.vllm_scheduling_policy === 'priority'
          ? withVllmPriority(body.json, body.text, vllmPriority(priority ?? 0))
          : undefined,
    ...(setup.config.saturation_mode === 'predicted' ? { predictedTtftMs: replica.ttftMs } : {}),
  };
}
