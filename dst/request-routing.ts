/**
 * Kong's part of the world for one request: it sends the request to one node's access phase,
 * proxies it to the replica chosen and runs the log phase on the same process, if still alive;
 * what each request met (answered, refused, proxied where) as the checks read it.
 */
import { UNSEEN_HOLD_MS } from '../src/adapters/replica-word';
import { DEFAULT_UNHEALTHY_TIMEOUTS } from '../src/config/poller-schema';
import { OBJECTIVE_HEADER, type SloHints } from '../src/router/slo-class';
import type { FleetRuntime } from '../src/runtime';
import { LeaseNotOpen } from '../src/lease';
import { kongOwnStatus, logPhase, type DecisionRecord } from '../src/router/log-phase';
import type { RouteOutcome } from '../src/router/outcome';
import type { RouterService } from '../src/router/router';
import { ACCESS_INVARIANT, answeredLate, refusalMalformed, type AccessAnswer } from './access-check';
import { modelNotFound, notFoundUnexcused, type AnswerGround } from './answer-check';
import { KONG_MARK_INVARIANT, kongMarkUnheeded } from './kong-mark-check';
import type { Flight } from './bound-check';
import { BoundWatch } from './bound-watch';
import { routingRequest, type CallsSeen } from './calls-seen';
import { waitedIdle } from './hold-check';
import { pastOwnSight, seenUp, type HealthReads } from './health-reads';
import type { BudgetRefusal, Violation, WorldView } from './invariants';
import { leaseIssuer } from './lease-watch';
import { procName, type NodeProcesses, type Process } from './node-processes';
import type { RedisModel } from './redis-model';
import { urlParts, type ClientGone, type ProxyAnswer, type ReplicaSet } from './replicas';
import { SERVED_TELL_INVARIANT, tellWrong, watchTells } from './served-tell-check';
import type { Action, Schedule } from './schedule';
import type { Scheduler } from './scheduler';
import { agedOut, leaseLost, unseenFirst, type SentRequest } from './unseen-check';
import { POLL_MS, POLL_TIMEOUT_MS, PROBE_MS, SEEN_SLACK_MS, UPSTREAM_TIMEOUT_MS } from './world-timings';

/** What routing a request reads of the world around it, and how it reports a violation. */
export interface RoutingGround {
  sched: Scheduler;
  schedule: Schedule;
  replicas: ReplicaSet;
  nodes: NodeProcesses;
  /** The shared states (databases 0 and 1). */
  redis: readonly RedisModel[];
  calls: CallsSeen;
  healthReads: HealthReads;
  /** What the answer check reads (dst/answer-check.ts). */
  answers: AnswerGround;
  /** When runtime `rt` was last seen deciding alone after a step (-Infinity: never). */
  localAt(rt: FleetRuntime): number;
  lastFaultAt(): number;
  /** When the calls sent into the last partition have all timed out (WorldFaults). */
  partitionTimeoutsBy(): number;
  lastRecordChange(): number;
  view(): WorldView;
  /** Records `v` unless a violation was found already. */
  violate(v: Violation): void;
}

export class RequestRouting {
  /** By replica and adapter: requests proxied there, by which process, whether it decided alone, until when. */
  private readonly proxied = new Map<string, SentRequest[]>();
  /**
   * What the clients' and Kong's draws met (dst/client-draw.ts): 499s logged, of them those the
   * replica ran on past the 499, later plugins' answers, source calls asked that took time, and the
   * log phases' tells of an end (`servedEnded`).
   */
  readonly clients = { gaveUp: 0, ranOn: 0, exits: 0, slowSources: 0, tells: 0 };
  /** Requests whose client gave up: when Kong logged 499 and closed the upstream connection. */
  private readonly closedAt = new WeakMap<SentRequest, number>();
  /** When each process (`n<node>g<gen>`) died: its requests still on their way answer no client. */
  private readonly diedAt = new Map<string, number>();
  /** Requests answered 429 for the fleet's cold-load budget (the budget check reads them). */
  readonly refusals: BudgetRefusal[] = [];
  /** By request (arrival number): its process, and whether its route answered. */
  readonly fates = new Map<number, { p: Process; answered: boolean }>();
  /** By request: when its decision ended (route answered or threw). */
  readonly decidedAt = new Map<number, number>();
  /** Overload refusals answered (503 `ttft_overload`, `shed_low_priority`), by code. */
  readonly overloadRefusals = { ttftOverload: 0, shed: 0 };
  /**
   * Kong's own 502/504 marked a replica down (`marked`); requests proxied, on the runtime marked,
   * after a marking that no poll had undone (`judged`: the kong-mark check's reach).
   */
  readonly kongMarks = { marked: 0, judged: 0 };
  /** Requests under way (any node, live or dead process). */
  inFlight = 0;
  /** Requests that came so far. */
  private arrivals = 0;
  /**
   * By replica (origin): requests proxied there not ended yet (the replica may run one on past
   * Kong's 499 until it stops it), and when the last one ended: the forget check's (dst/forget-check.ts).
   */
  readonly onReplica = new Map<string, { open: number; endedAt: number }>();
  private readonly w: Schedule['world'];
  /** Hold ends and the requests sent, for the `max_in_flight` check (dst/bound-check.ts). */
  readonly bound: BoundWatch;

  constructor(private readonly g: RoutingGround) {
    this.w = g.schedule.world;
    this.bound = new BoundWatch({
      now: () => g.sched.now(),
      degraded: () => g.view().degraded,
      lastFaultAt: () => g.lastFaultAt(),
      live: () => new Set(g.nodes.procs.filter((p) => p.alive).map(procName)),
      localAt: (rt) => g.localAt(rt),
      expiredAt: (db, id) => g.redis[db]?.expiredAt.get(id),
      holdsLease: (db, id) => g.redis[db]?.holdsLease(id) ?? false,
    });
  }

  /** The longest an idle fleet may take to route a request: its load, an unload making room, polls and probes. */
  private holdBoundMs(): number {
    return 2 * this.w.loadMs + 2 * PROBE_MS + POLL_MS;
  }

  async request(a: Extract<Action, { kind: 'request' }>): Promise<void> {
    const p = this.g.nodes.procs[a.node]!;
    if (!p.alive) return;
    const named = [...this.w.adapters, ...(this.w.staticAdapters ?? [])];
    const model = a.adapter < 0 ? 'meta-llama/Llama-3.1-8B-Instruct' : named[a.adapter]!;
    const body = JSON.stringify({
      model,
      messages: [{ role: 'user', content: 'x '.repeat(a.prompt) }],
      max_tokens: a.tokens,
    });
    // Alone on an idle fleet: nothing else can change while it routes (the hold's invariant).
    const alone = this.inFlight === 0;
    const arrivals = ++this.arrivals;
    if (a.adapter >= 0) this.g.calls.adapterOf.set(arrivals, model);
    const began = this.g.sched.now();
    this.inFlight++;
    p.open++;
    p.routing++;
    let routing = true;
    const fate = { p, answered: false };
    this.fates.set(arrivals, fate);
    // Counted out of routing once, whether route answered or threw.
    const routed = () => {
      routing = false;
      p.routing--;
      fate.answered = true;
      this.bound.ended(arrivals);
      // Kept if its process died first (`died`): its decision ended then.
      if (!this.decidedAt.has(arrivals)) this.decidedAt.set(arrivals, this.g.sched.now());
    };
    const svc = this.serviceFor(p, a);
    // The replicas the configuration routing it lists (a stale worker's: the previous one): the
    // health filter fails open among them, and its loads can go nowhere else.
    const listed = svc.config.replicas.map((r) => urlParts(r.url).origin);
    this.g.calls.listedOf.set(arrivals, listed);
    // The runtime current when it came: the one it is decided on (Router.route), or a successor.
    // Its service's: a stale worker's old configuration of a record the node moved from runs on
    // that record's runtime, not the node's newest (dst/config-draw.ts moves).
    const came = svc.runtime.current();
    // Whether the node decided alone when the request came (the kong-mark check: its decision's views).
    const localAtArrival = came.store.mode?.() === 'local';
    // The class header as Kong hands the plugin the request's headers (plugins/lora-router.ts reads it so).
    const headers: Record<string, string> = a.cls === undefined ? {} : { [OBJECTIVE_HEADER]: a.cls };
    const slo = (): Promise<SloHints> => Promise.resolve({ objective: headers[OBJECTIVE_HEADER] });
    const cls = this.w.sloClasses?.find((c) => c.name === a.cls);
    let sent: SentRequest | undefined;
    let decider: FleetRuntime | undefined;
    let flight: Flight | undefined;
    // When Kong logged 499 for it (undefined: it did not).
    let goneAt: number | undefined;
    // When the replica answered or dropped its exchange (undefined: not yet).
    let stoppedAt: number | undefined;
    try {
      const out = await routingRequest.run(arrivals, () =>
        this.bound.watch(arrivals, cls?.max_in_flight ?? 0, cls?.ttft_ms ?? 0, () =>
          svc.route({ path: '/v1/chat/completions', body, slo }),
        ),
      );
      routed();
      // An unexpected failure (errors.internal: RouterService.route turns any throw into it) is no
      // behaviour a fault or an overload explains; the answers' tally over seeds 1-3,000 found none.
      if (out.kind === 'respond' && errorCode(out.body) === 'router_error') {
        const w = this.g.view();
        this.g.violate({
          invariant: 'no request is answered 500 router_error',
          detail: `request ${arrivals} (${model}) on node ${a.node}, came at ${Math.round(began)} ms, answered 500 router_error`,
          at: w.now,
          step: w.step,
        });
      }
      if (out.kind === 'respond' && refusedForFleetBudget(out.status, out.body))
        this.refusals.push({ at: this.g.sched.now(), request: arrivals });
      if (out.kind === 'respond' && out.status === 503) {
        const code = errorCode(out.body);
        if (code === 'ttft_overload') this.overloadRefusals.ttftOverload++;
        else if (code === 'shed_low_priority') this.overloadRefusals.shed++;
      }
      const took = this.g.sched.now() - began;
      const scope = {
        // A call sent into a partition times out after its heal: its node may decide alone from then.
        lastFaultAt: Math.max(this.g.lastFaultAt(), this.g.partitionTimeoutsBy()),
        lastRecordChange: this.g.lastRecordChange(),
        boundMs: this.holdBoundMs(),
      };
      const slowMs = this.g.calls.slowMs(arrivals);
      if (waitedIdle({ began, took, alone, last: arrivals === this.arrivals, slowMs }, scope)) {
        const w = this.g.view();
        this.g.violate({
          invariant: 'a hold never waits with nothing that could change',
          detail: `${model} alone on an idle fleet routed after ${Math.round(took)} ms`,
          at: w.now,
          step: w.step,
        });
      }
      this.judgeAccess(
        out,
        { began, took, needsNoLoad: a.adapter < 0 || a.adapter >= this.w.adapters.length, slowMs },
        p,
        a.cls === undefined ? model : `${model} (${a.cls})`,
      );
      if (out.kind !== 'proxy' || !p.alive) return;
      const origin = urlParts(out.url).origin;
      this.avoided(p, origin, arrivals, listed);
      // The state its lease is on: the runtime that decided it (after a record change to other
      // state, a request waiting for room is decided again on the new one).
      const prefix = out.leaseId.slice(0, out.leaseId.lastIndexOf('-'));
      decider = decidedOn(p, came, out.leaseId, prefix);
      const proc = procName(p);
      const db = this.g.nodes.prefixDb.get(prefix) ?? p.db;
      // The deciding runtime's store, not the node's newest: after a same-state record change the
      // old runtime decides the requests under way on it (seed 525755).
      const decidedAlone = (decider ?? p.rt).store.mode?.() === 'local';
      flight = this.bound.sent(arrivals, origin, decider ?? p.rt, proc, db, decidedAlone, out.leaseId);
      // Its views may have come from either store if it began or stopped deciding alone meanwhile:
      // judged by the reading that excuses more (kongMarkHeeded).
      if ((decider ?? p.rt) === p.rt)
        this.kongMarkHeeded(
          p,
          origin,
          began,
          {
            sure: decidedAlone && localAtArrival,
            maybe: decidedAlone || localAtArrival,
          },
          listed,
        );
      // A later plugin answered it (a proxy-cache hit, request-termination's 503): never
      // proxied; the log phase still runs.
      if (a.exit) {
        flight.doneAt ??= this.g.sched.now();
        this.clients.exits++;
        const hit: KongAnswer = { status: a.exitStatus ?? 200, text: '', source: 'exit' };
        if (!p.alive) return;
        this.logInstance(p, svc);
        await this.logPhase(p, svc.runtime, out, hit, origin, arrivals, a.sourceMs);
        this.passive(p, decider, began, origin, hit);
        return;
      }
      // A client that gave up: Kong finds it gone once proxying began (dst/client-draw.ts).
      const client: ClientGone | undefined = a.gaveUp && {
        at: began + a.gaveUp.afterMs,
        unwritten: a.gaveUp.unwritten,
        noticeMs: a.gaveUp.noticeMs,
      };
      const unwritten = client !== undefined && client.unwritten && client.at <= this.g.sched.now();
      if (a.adapter >= 0) {
        const key = `${origin}\u0000${model}`;
        let list = this.proxied.get(key);
        if (!list) this.proxied.set(key, (list = []));
        list.push(
          (sent = {
            proc,
            alone: decidedAlone,
            db,
            at: this.g.sched.now(),
            reached: Infinity,
            ended: Infinity,
            lease: out.leaseId,
          }),
        );
      }
      let use = this.onReplica.get(origin);
      if (!use) this.onReplica.set(origin, (use = { open: 0, endedAt: -Infinity }));
      use.open++;
      const used = use;
      let stopped = false;
      const stop = () => {
        if (stopped) return;
        stopped = true;
        used.open--;
        used.endedAt = Math.max(used.endedAt, this.g.sched.now());
      };
      const answer = await this.g.replicas.proxy(
        origin,
        '/v1/chat/completions',
        out.body ?? body,
        this.w.upstreamTimeoutMs ?? UPSTREAM_TIMEOUT_MS,
        p.node,
        () => {
          if (sent) sent.reached = this.g.sched.now();
          if (!flight) return;
          // Into a hang: never in the engine, so no word of the replica renews its lease (dst/bound-check.ts).
          flight.reachedAt = this.g.sched.now();
          flight.reachedHung = this.g.replicas.hangs(origin);
        },
        () => {
          if (flight) flight.doneAt ??= this.g.sched.now();
          stoppedAt ??= this.g.sched.now();
          stop();
          // A 499's request runs on at the replica until it stops it (the engine's own log).
          if (goneAt === undefined) return;
          if (sent) sent.ended = stoppedAt;
          if (stoppedAt > goneAt) this.clients.ranOn++;
        },
        client,
      );
      flight.doneAt ??= this.g.sched.now();
      // Gone: Kong's part ends now; the replica's when it stops the request (the callback above),
      // now if it never had it or already answered it.
      // Answered (or never run there): the replica holds nothing of it (a 499's, until it stops it).
      if (answer.status !== 499 || client === undefined || unwritten) stop();
      if (answer.status === 499 && client !== undefined) {
        goneAt = this.g.sched.now();
        this.clients.gaveUp++;
        if (sent) {
          this.closedAt.set(sent, goneAt);
          if (unwritten) sent.ended = goneAt;
          else if (stoppedAt !== undefined) sent.ended = stoppedAt;
        }
      }
      if (sent && modelNotFound(answer.status, answer.text, model))
        this.notFound(sent, decider, origin, model, began);
      // The log phase, on the process that routed it (a dead one never runs it): the plugin's own.
      if (!p.alive) return;
      this.logInstance(p, svc);
      await this.logPhase(p, svc.runtime, out, answer, origin, arrivals, a.sourceMs);
      this.passive(p, decider, began, origin, answer);
    } finally {
      if (sent && goneAt === undefined) sent.ended = this.g.sched.now();
      this.g.healthReads.forget(arrivals);
      if (routing) routed();
      this.inFlight--;
      p.open--;
    }
  }

  /**
   * The plugin's log phase (src/router/log-phase.ts `logPhase`, as plugins/lora-router.ts calls it),
   * with the source Kong's `kong.response.get_source()` gives for the answer (dst/replicas.ts
   * `ProxyAnswer`): the lease back, and Kong's own 502/504 marks the replica down in the store of
   * the lease's runtime's successor (`current()`), this process's runtime now. That marking is
   * noted for the checks (dst/kong-mark-check.ts) when it landed on the runtime current at its end.
   */
  private async logPhase(
    p: Process,
    rt: FleetRuntime,
    out: Extract<RouteOutcome, { kind: 'proxy' }>,
    answer: KongAnswer,
    origin: string,
    request: number,
    sourceMs = 0,
  ): Promise<void> {
    const record: DecisionRecord = {
      lease: out.leaseId,
      replica: out.url,
      stage: out.stage,
      adapter: out.adapter,
    };
    const failedAt = this.g.sched.now();
    // Where the log phase marks (log-phase.ts: the lease's runtime, current): judged below only if
    // that is the node's newest (a record the node moved from is not followed).
    const on = rt.current();
    // `kong.response.get_source()` is a round trip to Kong: a poll may begin while it is under way.
    const source = () => {
      if (sourceMs === 0) return Promise.resolve(answer.source);
      this.clients.slowSources++;
      return new Promise<string>((resolve) => this.g.sched.after(sourceMs, () => resolve(answer.source)));
    };
    const tells = await watchTells(
      () => this.g.sched.now(),
      async () => {
        try {
          await logPhase(rt, record, answer.status, source);
        } catch (err) {
          // As the plugin: a lease reclaimed by age is logged, the marking was still made.
          if (!(err instanceof LeaseNotOpen)) throw err;
        }
      },
    );
    this.clients.tells += tells.length;
    const answered = answer.source === 'service' && answer.status !== 499;
    const why = tellWrong(tells, failedAt, answered, KONG_ANSWERS[answer.source] ?? `${answer.status}`);
    if (why !== undefined) {
      const w = this.g.view();
      this.g.violate({
        invariant: SERVED_TELL_INVARIANT,
        detail: `request ${request} on node ${p.node}: ${why}`,
        at: w.now,
        step: w.step,
      });
    }
    if (!p.alive || p.rt !== on || !kongOwnStatus(answer.status) || answer.source !== 'error') return;
    this.kongMarks.marked++;
    const by = this.g.nodes.senderOf(on);
    this.g.healthReads.kongMarked(by, origin, {
      status: answer.status,
      failedAt,
      markedAt: this.g.sched.now(),
      db: p.db,
      by,
      shared: on.store.mode?.() !== 'local',
      request,
    });
  }

  /**
   * Passive health, as its store counted it: a lease of the runtime deciding now, too young for
   * any expiry to have reclaimed it (a lease gone counts nothing there). The log phase tells it
   * no 499 (the client's) and no 5xx but the replica's or Kong's 502/504 (src/router/log-phase.ts
   * `replicaStatus`); the release counts any other status below 500 as an answer, a later
   * plugin's 200 too (src/fleet/memory-store.ts).
   */
  private passive(
    p: Process,
    decider: FleetRuntime | undefined,
    began: number,
    origin: string,
    { status, source }: KongAnswer,
  ): void {
    if (status === 499) return;
    if (status >= 500 && source !== 'service' && !(kongOwnStatus(status) && source === 'error')) return;
    if ((decider ?? p.rt) === p.rt && this.g.sched.now() - began < this.w.leaseMaxAgeMs / 2)
      this.g.healthReads.upstreamAnswered(this.g.nodes.senderOf(p.rt), origin, status, this.g.sched.now());
  }

  /** dst/access-check.ts: answered within its access bound; a refusal for overload with OpenAI's error and Retry-After. */
  private judgeAccess(out: RouteOutcome, a: AccessAnswer, p: Process, model: string): void {
    if (!p.alive) return;
    const late = answeredLate(a, this.g.nodes.accessConfig(), {
      lastFaultAt: this.g.lastFaultAt(),
      lastRecordChange: this.g.lastRecordChange(),
    });
    const code = out.kind === 'respond' ? errorCode(out.body) : undefined;
    const malformed =
      out.kind === 'respond' && (code === 'ttft_overload' || code === 'shed_low_priority')
        ? refusalMalformed(out.status, out.body, out.headers)
        : undefined;
    const why = late ?? malformed;
    if (why === undefined) return;
    const w = this.g.view();
    this.g.violate({
      invariant: ACCESS_INVARIANT,
      detail: `${model} on node ${p.node}, came at ${Math.round(a.began)} ms: ${why}`,
      at: w.now,
      step: w.step,
    });
  }

  /** `sent`, proxied to `replica` for `adapter`, was answered that the replica does not serve it (dst/answer-check.ts). */
  private notFound(
    sent: SentRequest,
    decider: FleetRuntime | undefined,
    replica: string,
    adapter: string,
    began: number,
  ): void {
    const why = notFoundUnexcused(
      {
        url: replica,
        name: adapter,
        proc: sent.proc,
        sentAt: sent.at,
        reachedAt: sent.reached ?? sent.at,
        db: sent.db,
        // Local at its proxy, or at any step since it came: its decision may have read its own state
        // and the store be back on Redis by the proxy (seed 19796). The runtime that decided it, not
        // only the node's newest: after a same-state record change the old one decides it (seed 525755).
        alone:
          sent.alone ||
          (decider !== undefined && (decider.store.mode?.() === 'local' || this.g.localAt(decider) >= began)),
        ...(this.diedAt.has(sent.proc) ? { diedAt: this.diedAt.get(sent.proc)! } : {}),
      },
      this.g.answers,
    );
    if (why === undefined) return;
    const w = this.g.view();
    this.g.violate({
      invariant: 'a request proxied for an adapter finds it there',
      detail: why,
      at: w.now,
      step: w.step,
    });
  }

  /**
   * Process `p` died: the requests it was routing decided now. Its route never settles (its
   * clock stops), so without this they stayed deciding for the rest of the run, and the room
   * check counted the room each was making as still to be filled (review2).
   */
  /**
   * The service a request at `p` goes through: its node's current configuration's, or, drawn so
   * (`onOldConfig`) within `staleMs` of a change, the previous one's (a worker that has not rebuilt
   * its plugins yet), which marks that configuration used.
   */
  private serviceFor(p: Process, a: Extract<Action, { kind: 'request' }>): RouterService {
    const cc = this.w.configChanges;
    if (!cc || !a.onOldConfig) return p.svc;
    const now = this.g.sched.now();
    const olds = this.g.nodes.oldConfigs;
    for (let i = olds.length - 1; i >= 0; i--) {
      const old = olds[i]!;
      if (old.node !== p.node || old.gen !== p.gen) continue;
      if (now - old.supersededAt > cc.staleMs) return p.svc;
      old.usedAt = now;
      return old.svc;
    }
    return p.svc;
  }

  /**
   * A log phase on `svc`'s configuration: superseded since and the worker rebuilt (past
   * `staleMs`), Kong starts an instance of it (NodeProcesses.oldInstance). A stale worker still
   * holds the old instance: its log phase runs there, starting nothing.
   */
  private logInstance(p: Process, svc: RouterService): void {
    const cc = this.w.configChanges;
    if (!cc) return;
    const old = this.g.nodes.oldConfigOf(p, svc);
    if (old && this.g.sched.now() - old.supersededAt > cc.staleMs) this.g.nodes.oldInstance(p, old);
  }

  died(p: Process): void {
    const now = this.g.sched.now();
    this.diedAt.set(procName(p), now);
    for (const [request, fate] of this.fates)
      if (fate.p === p && !this.decidedAt.has(request)) {
        this.decidedAt.set(request, now);
        this.bound.ended(request);
      }
  }

  /**
   * Whether every request under way on `adapter` at `replica` when its unload went out is an unseen
   * router's first there (dst/unseen-check.ts): docs/reliability.md ("An adapter someone unseen
   * routes is held", not covered) leaves it to chance (seeds 1026501, 37593). Any other busy unload
   * is (i) broken.
   */
  unseenFirst(replica: string, adapter: string): boolean {
    const key = `${replica}\u0000${adapter}`;
    const u = this.g.calls.unloaders.get(key);
    if (u === undefined) return false;
    const sent = (this.proxied.get(key) ?? []).map((r) => {
      const closed = this.closedAt.get(r);
      return { ...r, ...(this.lost(r) ? { lost: true } : {}), ...(closed === undefined ? {} : { closed }) };
    });
    return unseenFirst(sent, u, this.g.sched.now(), UNSEEN_HOLD_MS);
  }

  /** Whether `r`'s lease is lost now to an emptied state its router, cut off, has not taken it again on (`leaseLost`). */
  private lost(r: SentRequest): boolean {
    if (r.lease === undefined) return false;
    const prefix = r.lease.slice(0, r.lease.lastIndexOf('-'));
    const p = this.g.nodes.procs.find((q) => q.alive && procName(q) === r.proc);
    // Only the runtime that took it, still the process's own on that state, could take it again.
    if (!p || p.rt.leasePrefix !== prefix || p.db !== r.db) return false;
    const state = this.g.redis[r.db]!;
    const registeredAt = state.registeredAt.get(prefix);
    const foundAt = state.foundLostAt.get(prefix);
    const walks = this.g.nodes.retakeWalks.get(prefix);
    const takenAt = state.leaseTakenAt.get(r.lease);
    return leaseLost(r, {
      resets: state.resets,
      open: state.openLeases().has(r.lease),
      routerAlone: p.rt.store.mode?.() === 'local',
      ...(registeredAt === undefined ? {} : { routerRegisteredAt: registeredAt }),
      ...(foundAt === undefined ? {} : { routerFoundAt: foundAt }),
      ...(walks?.endedAt === undefined ? {} : { routerRetakenAt: walks.endedAt }),
      ...(walks?.dueAt === undefined ? {} : { routerWalkDueAt: walks.dueAt }),
      ...(walks?.begunAt === undefined ? {} : { routerWalkBegunAt: walks.begunAt }),
      ...(takenAt === undefined ? {} : { takenAt }),
    });
  }

  /**
   * Requests routed to `adapter` at `replica` by a live process, not there yet: a dead process's
   * leases go with it (pruned once it is found silent), so its requests hold nothing. Only those
   * whose lease is on the unloader's shared state: a lease on the other (a record change to other
   * state under way) was never in the store the unloader reads (docs/reliability.md, not covered:
   * record changes; seed 638713). Nor one whose lease the expiry reclaimed by age: a request on the
   * wire is in no word of the replica, so nothing renews its lease, and a lease not renewed for
   * `lease_max_age_ms` is reclaimed and its adapter may be unloaded (docs/reliability.md, "A lease whose
   * log phase never came"): proxied with half the max age left at least, a slow path past that loses
   * it (seed 7753: 4 s, a hop of 2.9 s; the default 600 s is past any hop).
   */
  onTheWay(replica: string, adapter: string): number {
    const now = this.g.sched.now();
    const key = `${replica}\u0000${adapter}`;
    const db = this.g.calls.unloaders.get(key)?.db;
    const live = (proc: string) => this.g.nodes.procs.some((p) => p.alive && procName(p) === proc);
    const sent = this.proxied.get(key) ?? [];
    const expired = (r: SentRequest) => {
      if (r.lease === undefined) return false;
      const state = this.g.redis[r.db]!;
      return agedOut(r, state.expiredAt.get(r.lease), state.holdsLease(r.lease), now);
    };
    return sent.filter(
      (r) =>
        (r.reached ?? r.at) > now &&
        r.ended > now &&
        // Kong closed it: one still on its way finds no client, whatever it finds there.
        !((this.closedAt.get(r) ?? Infinity) <= now) &&
        live(r.proc) &&
        (db === undefined || r.db === db) &&
        !expired(r),
    ).length;
  }

  /**
   * A replica down (refused, hanging, answering 500) since before this process and its runtime's
   * state began, and for longer than its poller takes to see it, gets no request from it while
   * another replica is up (test/reliability/faults.test.ts's "once seen, none goes there"). Not
   * counted: the time request `arrival` waited on replies a slow link made late since its last
   * read of health (dst/health-reads.ts, seed 516051). Another replica counts only if the
   * configuration that routed it lists it (`listed`): the health filter fails open among those
   * (seed 2859841: a node's configuration listing only the replica down).
   */
  private avoided(p: Process, origin: string, arrival: number, listed: readonly string[]): void {
    const down = this.g.replicas.down(origin, POLL_MS, POLL_TIMEOUT_MS);
    if (!down || down.since < Math.max(p.startedAt, this.g.lastRecordChange())) return;
    const now = this.g.sched.now();
    const sender = this.g.nodes.senderOf(p.rt);
    const alone = p.rt.store.mode?.() === 'local';
    // Deciding alone, the node sees the down through its own polls only: from its next poll after
    // one of this replica that timed out on a slow path from its host (seed 1646547), and not
    // before its poll under way began (seed 1729199), unless one of its polls begun since the down
    // ended with a verdict (from the last timeout before it began: seed 2676738), or its timeouts in
    // a row marked it down there already.
    const markedDown = this.g.healthReads.timeoutsInRow(sender, origin) >= DEFAULT_UNHEALTHY_TIMEOUTS;
    const since =
      alone && !markedDown ? this.g.healthReads.ownSightFrom(sender, origin, down.since) : down.since;
    const d = { ...down, since };
    // Its own requests' failures there, deciding alone, marked it down at once (passive health).
    const passive = alone ? this.g.healthReads.passiveDownFrom(sender, origin, down.since) : Infinity;
    if (!pastOwnSight(now, d, passive, this.g.healthReads.lateMs(arrival, now), SEEN_SLACK_MS)) return;
    // Every replica down, its scrape failing, or back too recently for a poll to have seen it
    // (seeds 1046, 102325): the router fails open and may have nowhere better to send it.
    // Nor, deciding alone, one its own polls timed out on `unhealthy_timeouts` times in a row
    // since their last answer (a slow path from its host to it: seed 100813): down there too.
    const sees = { sender, db: p.db, alone: { sure: alone, maybe: alone } };
    if (!listed.some((u) => this.seenUpBy(sees, u, now))) return;
    const w = this.g.view();
    this.g.violate({
      invariant: 'a replica seen down gets no request',
      detail: `node ${p.node} routed to ${origin}, down for ${Math.round(now - down.since)} ms`,
      at: w.now,
      step: w.step,
    });
  }

  /**
   * Whether replica `u` is up as runtime `sender` (on shared state `db`) can see it at `now` (`seenUp`),
   * Kong's 502/504 not having marked it down there: its own marking no poll of its own has undone, or,
   * maybe sharing the state, any runtime's there no poll has undone (seed 2016001: another node's 504
   * marked the other replica down in Redis, and the health filter failed open). Undone only by a poll
   * begun after the marking reached the store, not after the 502 (`kongMarkMayHold`, seed 2237878).
   * `alone.maybe`, `alone.sure`: it may have decided alone, it surely did; each reading excuses the more.
   */
  private seenUpBy(
    v: { sender: string; db: number; alone: { sure: boolean; maybe: boolean } },
    u: string,
    now: number,
  ): boolean {
    const reads = this.g.healthReads;
    return (
      seenUp(
        now,
        this.g.replicas.up(u, POLL_MS, POLL_TIMEOUT_MS),
        { alone: v.alone.maybe, timeoutsInRow: reads.timeoutsInRow(v.sender, u) },
        DEFAULT_UNHEALTHY_TIMEOUTS,
        SEEN_SLACK_MS,
      ) &&
      !reads.kongMarkMayHold(v.sender, u, now, SEEN_SLACK_MS) &&
      (v.alone.sure || !reads.kongMarkMayHoldOn(v.db, u, now, SEEN_SLACK_MS))
    );
  }

  /** dst/kong-mark-check.ts: a request that came after Kong's marking of `origin` on `p`'s runtime, proxied there. */
  private kongMarkHeeded(
    p: Process,
    origin: string,
    began: number,
    alone: { sure: boolean; maybe: boolean },
    /** The replicas the configuration that routed it lists: the health filter's candidates (it fails open among them). */
    listed: readonly string[],
  ): void {
    const sender = this.g.nodes.senderOf(p.rt);
    // Another node's poll undoes the marking unless the node surely decided alone. Its own marking
    // binds it deciding alone (its local store has it) or once it reached the shared state (one made
    // alone is handed on at the return dated 50 ms early: not covered); surely sharing, any node's
    // marking that reached the state binds it too. Another replica is up only if it is so by either
    // reading (`seenUpBy`).
    const reads = this.g.healthReads;
    const standing = (u: string) => {
      const own = reads.kongMarkStanding(sender, u, alone.sure);
      if (own && (alone.sure || own.shared)) return own;
      return alone.maybe ? undefined : reads.kongMarkStandingOn(p.db, u);
    };
    if (this.g.replicas.urls.some((u) => (standing(u)?.markedAt ?? Infinity) < began))
      this.kongMarks.judged++;
    const mark = standing(origin);
    if (!mark) return;
    const now = this.g.sched.now();
    const why = kongMarkUnheeded({
      mark,
      began,
      alone: alone.sure,
      resets: this.g.redis[mark.db]!.resets,
      otherUp: listed.some((u) => u !== origin && this.seenUpBy({ sender, db: p.db, alone }, u, now)),
    });
    if (why === undefined) return;
    const w = this.g.view();
    this.g.violate({
      invariant: KONG_MARK_INVARIANT,
      detail: `node ${p.node} routed to ${origin}: ${why}`,
      at: w.now,
      step: w.step,
    });
  }
}

/** What Kong's log phase met: the replica's answer, Kong's own, or a later plugin's (source 'exit'). */
type KongAnswer = Omit<ProxyAnswer, 'source'> & { source: ProxyAnswer['source'] | 'exit' };

/** Why a log phase's answer is none the replica gave, for a served-tell violation's detail. */
const KONG_ANSWERS: Record<string, string> = {
  exit: 'a later plugin answered it (source exit)',
  error: "it was Kong's own answer (source error)",
  service: 'its client gave up (499)',
};

function errorCode(body: unknown): string | undefined {
  return (body as { error?: { code?: string } } | undefined)?.error?.code;
}

/** A 429 for the fleet's cold-load budget (errors.coldLoadBudget, scope fleet). */
function refusedForFleetBudget(status: number, body: unknown): boolean {
  const e = (body as { error?: { code?: string; message?: string } } | undefined)?.error;
  return status === 429 && e?.code === 'rate_limit_exceeded' && e.message?.includes('the fleet has') === true;
}

/**
 * The runtime of `p` that decided a request which came while `came` was current and took lease
 * `leaseId`: `came` itself, or a successor it was decided again on after a record change to other
 * state (Router.route, RuntimeReplaced: the one current then). The runtime that handed out the
 * id, not the first with its prefix: a same-state successor shares its predecessor's prefix, and
 * a request replaced by other state goes to the current runtime, which may be such a successor
 * (seed 3129582: named by prefix, the predecessor took a lease of its successor's as its own).
 */
function decidedOn(
  p: Process,
  came: FleetRuntime,
  leaseId: string,
  prefix: string,
): FleetRuntime | undefined {
  const from = p.runtimes.indexOf(came);
  if (from < 0) return undefined;
  const after = p.runtimes.slice(from);
  const issuer = leaseIssuer(leaseId);
  return issuer && after.includes(issuer) ? issuer : after.find((rt) => rt.leasePrefix === prefix);
}
