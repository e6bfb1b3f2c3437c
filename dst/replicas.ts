/**
 * The replicas of the simulated world: the simulator's vLLM (sim/http, its LoRA registry, error
 * texts and /metrics as the real one answers) around its engine model, reached in process. Each
 * node talks to them through the real HttpReplicaApi, whose ReplicaHttp is replaced here by a
 * call without a socket: same answers, bounded by the caller's timeout on its node's clock.
 * Replica faults sit between the two: a restart that forgets the adapters loaded at run time
 * (calls refused while down, every exchange under way reset), a `/metrics` that fails, never
 * answers, or comes garbled or truncated, slow loads, and loads that fail with vLLM's texts.
 */
import { BackendError } from '../src/backends/errors';
import type { HttpReply, ReplicaHttp } from '../src/backends/http';
import { parseModels } from '../src/backends/http-replica-api';
import type { Clock } from '../src/clock';
import type { Random } from '../src/random';
import { loadCostFor } from '../sim/engine/load-cost';
import type { SimError } from '../sim/http/errors';
import { SimReplica, type Exchanged } from '../sim/http/replica';
import { dur } from './draws';
import { trip } from './scheduler';

/** Unix seconds at virtual time 0: a fixed date, so the replicas' `Date` headers replay exactly. */
const EPOCH_UNIX = 1_780_000_000;

export interface ReplicaSetOptions {
  replicas: number;
  /** vLLM --max-loras (the engine's batch bound), at least the router's max_loaded_adapters. */
  maxLoras: number;
  /** Load time of an adapter (rank 16). */
  loadMs: number;
  /** ms per decode step: a request of n tokens takes about n steps. */
  decodeMsPerStep: number;
  /**
   * Adapters the router may load: those with a comma are put at their paths by name (the
   * simulator's adapter directories hold plain names only).
   */
  adapters?: readonly string[];
  /** Adapters every replica holds from its start (vLLM `--lora-modules`): static to the router. */
  staticAdapters?: readonly string[];
  /** vLLM --max-num-seqs (absent: the engine's default, 16). */
  maxNumSeqs?: number;
}

/** How a `/metrics` answer goes wrong. */
export type ScrapeFault = 'error' | 'timeout' | 'garbled' | 'truncated';
/** A replica that answers nothing (hangs) or 500 on every route, for a while. */
export type Outage = 'hang' | 'error500';
/** Why a load fails: vLLM's answers (docs/replica-apis.md, "vLLM engine-side load failure text"). */
export type LoadFailure = 'not-found' | 'rank' | 'engine';

/** The faults of one replica now (times on the scheduler's clock). */
interface FaultState {
  /** When the current stretch of restarts, hangs or 500s began (NEVER: none under way). */
  since: number;
  /** Whether the stretch had a hang (polls time out before they see it down). */
  hung: boolean;
  downUntil: number;
  outage: Outage;
  outageUntil: number;
  scrape: ScrapeFault;
  scrapeUntil: number;
  slowLoadMs: number;
  slowLoadUntil: number;
  failLoads: number;
  failure: LoadFailure;
  /** Garbled or truncated answers so far: which way the next one breaks. */
  broken: number;
  /** Exchanges under way: a restart resets their connections. */
  pending: Set<() => void>;
}

/** A load call the fault layer answered with a failure: sent by `sender`, answered at `at`. */
export interface FailedLoad {
  at: number;
  /** `at` on the sender's clock (skewed): the one its backoff runs on (seed 134920). */
  clockAt: number;
  /**
   * When the answer reached the sender, on its clock: the router's backoff starts there, a trip
   * after `at`, and a skew step between the two moves it (seed 116306). None: never heard.
   */
  heardClockAt?: number;
  /**
   * Whether the first registry read (`GET /v1/models`) its sender sent to the replica after hearing
   * it (an engine failure: the router reads after no other) listed `name`: the router then takes the
   * load as landed and starts no backoff
   * (docs/reliability.md, "A load whose answer is lost is the replica's to say too"; seed 436555:
   * another node's load of it landed there meanwhile). None: no such read answered.
   */
  listedAfter?: boolean;
  url: string;
  name: string;
  sender: string;
}

/**
 * A replica's answer through the faults; a load the fault layer failed carries its record, and
 * `readAfter` when its router reads the replica's registry after it (an engine failure: not the
 * adapter's own fault, LoadCalls.load in src/adapters/load-call.ts; a 404 or a rank refusal backs off unread).
 */
type Answered = Exchanged & { failure?: FailedLoad; readAfter?: boolean };

const NEVER = -Infinity;
/** No failed load waiting on a read (most calls). */
const NONE: readonly FailedLoad[] = [];

export class ReplicaSet {
  readonly replicas: SimReplica[];
  readonly urls: string[];
  private readonly byOrigin = new Map<string, number>();
  private readonly faults: FaultState[];
  /** Slow paths by node and replica index: until when, and the time added each way. */
  private readonly paths = new Map<string, { until: number; hopMs: number }>();
  /** Loads the fault layer failed, in order: the backoff invariant reads them. */
  readonly failedLoads: FailedLoad[] = [];
  /** Failed loads a sender heard from a replica and has not read its registry since, by sender and replica. */
  private readonly unread = new Map<string, FailedLoad[]>();
  /** Restarts that forgot adapters loaded at run time, in order: when, and which replica. */
  readonly registryLost: { url: string; at: number; names: string[] }[] = [];
  /**
   * Draws when the engine takes the abort of a request Kong timed out (its 504): a stream of its
   * own, drawn only at a 504, so a seed without one replays as before (World sets it).
   */
  timeoutNotice: Random | null = null;
  /**
   * Told, in the caller's context, of each process call sent over a slow path (its hop each
   * way); what it returns is told once the call settles (answered, failed or timed out).
   */
  slowCallSeen: (hopMs: number) => () => void = () => () => undefined;

  constructor(
    private readonly clock: Clock,
    private readonly o: ReplicaSetOptions,
  ) {
    this.replicas = Array.from(
      { length: o.replicas },
      () =>
        new SimReplica({
          clock,
          epochUnix: EPOCH_UNIX,
          adapterDirs: ['/adapters'],
          adapterPaths: Object.fromEntries(
            (o.adapters ?? []).filter((n) => n.includes(',')).map((n) => [`/adapters/${n}`, 16]),
          ),
          staticAdapters: (o.staticAdapters ?? []).map((name) => ({ name, path: `/static/${name}` })),
          engine: {
            maxLoras: o.maxLoras,
            maxCpuLoras: o.maxLoras + 1,
            ...(o.maxNumSeqs !== undefined ? { maxNumSeqs: o.maxNumSeqs } : {}),
            decodeMsPerStep: o.decodeMsPerStep,
            ...loadCostFor(o.loadMs, 16),
          },
        }),
    );
    this.urls = this.replicas.map((_, i) => `http://replica-${i}:8000`);
    this.urls.forEach((url, i) => this.byOrigin.set(url, i));
    this.faults = this.replicas.map(() => ({
      since: NEVER,
      hung: false,
      downUntil: NEVER,
      outage: 'hang',
      outageUntil: NEVER,
      scrape: 'error',
      scrapeUntil: NEVER,
      slowLoadMs: 0,
      slowLoadUntil: NEVER,
      failLoads: 0,
      failure: 'engine',
      broken: 0,
      pending: new Set(),
    }));
  }

  private index(origin: string): number {
    const i = this.byOrigin.get(origin);
    if (i === undefined) throw new Error(`no replica ${origin}`);
    return i;
  }

  replica(url: string): SimReplica {
    return this.replicas[this.index(url)]!;
  }

  /** The replica restarts: what it ran and loaded at run time is gone; refused for `downMs`. */
  restart(i: number, downMs: number): void {
    const f = this.faults[i]!;
    for (const abort of [...f.pending]) abort();
    const before = this.replicas[i]!.registered();
    this.replicas[i]!.reboot();
    const after = new Set(this.replicas[i]!.registered());
    const names = before.filter((name) => !after.has(name));
    if (names.length > 0) this.registryLost.push({ url: this.urls[i]!, at: this.clock.now(), names });
    this.stretch(f, false);
    f.downUntil = this.clock.now() + downMs;
  }

  /**
   * Whether the replica at `origin` hangs now: what reaches it now is never in its engine, so no
   * word of it (running, waiting) renews its lease (dst/bound-check.ts `leaseAgedOut`).
   */
  hangs(origin: string): boolean {
    const f = this.faults[this.index(origin)]!;
    const now = this.clock.now();
    return now >= f.downUntil && now < f.outageUntil && f.outage === 'hang';
  }

  /** For `ms`, the replica hangs (answers nothing) or answers 500 on every route. */
  outage(i: number, ms: number, mode: Outage): void {
    const f = this.faults[i]!;
    this.stretch(f, mode === 'hang');
    Object.assign(f, { outage: mode, outageUntil: this.clock.now() + ms });
  }

  /** A restart, hang or 500s begins: a new stretch down, or the one under way goes on. */
  private stretch(f: FaultState, hang: boolean): void {
    const now = this.clock.now();
    if (now < f.downUntil || now < f.outageUntil) f.hung ||= hang;
    else Object.assign(f, { since: now, hung: hang });
  }

  /**
   * Since when the replica at `origin` has refused, hung or answered 500 without a break, if it
   * does now; with how long a poller takes to see it (a refusal or a 500 counts at once, a hang
   * after `unhealthy_timeouts` (2) polls in a row time out).
   */
  down(origin: string, pollMs: number, timeoutMs: number): { since: number; seenWithinMs: number } | null {
    const f = this.faults[this.index(origin)]!;
    const now = this.clock.now();
    if (now >= f.downUntil && now >= f.outageUntil) return null;
    return { since: f.since, seenWithinMs: f.hung ? pollMs + 2 * (pollMs + timeoutMs) : pollMs };
  }

  /**
   * Since when the replica at `origin` has answered and been scraped without a fault, if it does
   * now; with how long a poller takes to see it so (the next poll; one more when a poll begun while
   * it hung or its scrape timed out may still be waiting out its timeout).
   */
  up(origin: string, pollMs: number, timeoutMs: number): { since: number; seenWithinMs: number } | null {
    const f = this.faults[this.index(origin)]!;
    const since = Math.max(f.downUntil, f.outageUntil, f.scrapeUntil);
    if (this.clock.now() < since) return null;
    const slow = (f.hung && since === f.outageUntil) || (f.scrape === 'timeout' && since === f.scrapeUntil);
    return { since, seenWithinMs: pollMs + (slow ? pollMs + timeoutMs : 0) };
  }

  /**
   * Kong on node `node` proxying a request to the replica at `origin`: the status its log phase
   * sees (502 for a connection refused or reset, 504 past the upstream `timeoutMs`), and the
   * replica's body (empty for the gateway's own 502 and 504: dst/answer-check.ts reads it). On a
   * slow path the request reaches the replica `hopMs` late (`reached` says when) and its answer
   * comes back as late: a request its router leased is not yet the replica's to report. `done`:
   * the replica answered it, or its exchange ended (reset, aborted at Kong's timeout).
   */
  async proxy(
    origin: string,
    path: string,
    body: string,
    timeoutMs: number,
    node = -1,
    reached: () => void = () => undefined,
    done: () => void = () => undefined,
    client?: ClientGone,
  ): Promise<ProxyAnswer> {
    const hop = this.hopMs(node, origin);
    const gone = client !== undefined && client.at <= this.clock.now();
    // Gone before proxying began, the upstream closed before the request was written: never there.
    if (gone && client.unwritten) return { status: 499, text: '', source: 'service' };
    let answered: Promise<ProxyAnswer>;
    let abort: () => void;
    // Kong closed the connection after writing the request: the replica stops it once the close
    // has come down the path and its engine took the abort; before it arrived, once it arrives.
    let closed = false;
    let stop = () => {};
    if (hop === 0) {
      reached();
      const x = this.exchange(origin, 'POST', path, body);
      answered = x.reply.then((r) => {
        done();
        return proxyAnswer(r);
      });
      abort = x.abort;
      stop = x.abort;
    } else {
      let gaveUp = false;
      let reset = () => {};
      answered = new Promise<ProxyAnswer>((resolve) => {
        this.clock.after(hop, () => {
          if (gaveUp) return;
          reached();
          const x = this.exchange(origin, 'POST', path, body);
          reset = x.abort;
          // Closed on its way: stopped once its handler listens (vLLM's `with_cancellation`).
          if (closed) this.clock.after(0, x.abort);
          void x.reply.then((r) => {
            done();
            this.clock.after(hop, () => resolve(proxyAnswer(r)));
          });
        });
      });
      abort = () => {
        gaveUp = true;
        reset();
      };
      stop = () => {
        closed = true;
        reset();
      };
    }
    let cancel = () => {};
    const late = new Promise<ProxyAnswer>((resolve) => {
      cancel = this.clock.after(timeoutMs, () => {
        // Kong's upstream read timeout closes the upstream connection, as a client gone does
        // (nginx src/http/ngx_http_upstream.c: `process_header` on a read timed out calls
        // `ngx_http_upstream_next(..., NGX_HTTP_UPSTREAM_FT_TIMEOUT)`, which finalizes with 504
        // and closes the peer; read at nginx 1.9.2, not at the nginx Kong 3.9 bundles): the
        // engine takes the abort once the close came down the path and its handler heard
        // `http.disconnect`, 0-500 ms later, drawn as a 499's (vLLM v0.11.0 `with_cancellation`).
        const notice = this.timeoutNotice;
        if (notice) this.clock.after(hop + dur(notice, 0, 500), stop);
        else abort();
        resolve({ status: 504, text: '', source: 'error' });
      });
    });
    let left = () => {};
    // nginx finds the client gone (proxy_ignore_client_abort off), logs 499 and closes the upstream
    // connection; Kong set KONG_PROXIED before the balancer, so `get_source` says 'service'.
    const gaveUp =
      client === undefined
        ? undefined
        : new Promise<ProxyAnswer>((resolve) => {
            left = this.clock.after(Math.max(0, client.at - this.clock.now()), () => {
              this.clock.after(hop + client.noticeMs, stop);
              resolve({ status: 499, text: '', source: 'service' });
            });
          });
    const status = await Promise.race(gaveUp ? [answered, late, gaveUp] : [answered, late]);
    cancel();
    left();
    return status;
  }

  /** For `ms`, the path between node `node`'s host and replica `i` adds `hopMs` each way. */
  slowPath(node: number, i: number, ms: number, hopMs: number): void {
    this.paths.set(`${node}\u0000${i}`, { until: this.clock.now() + ms, hopMs });
  }

  /** The time node `node`'s path to the replica at `origin` adds each way now (0: none). */
  private hopMs(node: number, origin: string): number {
    const p = this.paths.get(`${node}\u0000${this.index(origin)}`);
    return p && this.clock.now() < p.until ? p.hopMs : 0;
  }

  /** For `ms`, the replica's `/metrics` answers go wrong the way `mode` says. */
  breakScrapes(i: number, ms: number, mode: ScrapeFault): void {
    Object.assign(this.faults[i]!, { scrape: mode, scrapeUntil: this.clock.now() + ms });
  }

  /** For `ms`, each load call reaches the replica `slowMs` late (a slow disk or download). */
  slowLoads(i: number, ms: number, slowMs: number): void {
    Object.assign(this.faults[i]!, { slowLoadMs: slowMs, slowLoadUntil: this.clock.now() + ms });
  }

  /** The replica's next `count` loads fail, answered as vLLM answers `failure`. */
  failLoads(i: number, count: number, failure: LoadFailure): void {
    Object.assign(this.faults[i]!, { failLoads: count, failure });
  }

  /**
   * One exchange with the replica at `origin` through its faults; `sender` names the caller (the
   * backoff invariant's key), `senderClock` is its clock. Status 0: the connection was refused or reset.
   */
  exchange(
    origin: string,
    method: string,
    path: string,
    body: string,
    sender = '',
    senderClock: Clock = this.clock,
  ): { reply: Promise<Answered>; abort: () => void } {
    const i = this.index(origin);
    const f = this.faults[i]!;
    const replica = this.replicas[i]!;
    const now = this.clock.now();
    if (now < f.downUntil)
      return { reply: Promise.resolve({ status: 0, text: 'connection refused' }), abort: () => {} };
    if (now < f.outageUntil && f.outage === 'error500')
      return {
        reply: Promise.resolve(answer(replica.error(500, 'InternalServerError', 'Internal Server Error'))),
        abort: () => {},
      };
    let done: (r: Answered) => void = () => {};
    const reply = new Promise<Answered>((r) => (done = r));
    let inner = () => {};
    let settled = false;
    const settle = (r: Answered) => {
      if (settled) return;
      settled = true;
      f.pending.delete(reset);
      done(r);
    };
    const reset = () => {
      inner();
      settle({ status: 0, text: 'connection reset' });
    };
    f.pending.add(reset);
    // Hanging: never answered; the caller's bound (or Kong's upstream timeout) ends it.
    if (now < f.outageUntil) return { reply, abort: reset };
    const forward = (transform?: (r: Exchanged) => Exchanged) => {
      if (settled) return;
      const x = replica.exchange(method, path, body);
      inner = x.abort;
      void x.reply.then((r) => settle(transform ? transform(r) : r));
    };
    if (method === 'GET' && path === '/metrics' && now < f.scrapeUntil) {
      if (f.scrape === 'error')
        settle(answer(replica.error(500, 'InternalServerError', 'Internal Server Error')));
      else if (f.scrape === 'garbled') {
        const n = f.broken++;
        forward((r) => ({ ...r, text: garble(r.text, n) }));
      } else if (f.scrape === 'truncated') {
        // The connection closed mid-body: the router's HTTP client (undici) refuses a body shorter
        // than its Content-Length or an unfinished chunked one (test/core/cut-body.test.ts), so
        // the caller sees a reset, never a 200 with part of the text. A text the replica itself
        // writes broken is the 'garbled' fault.
        f.broken++;
        forward(() => ({ status: 0, text: 'connection closed mid-body' }));
      }
      // 'timeout': never answered; the caller's bound ends it.
      return { reply, abort: reset };
    }
    if (method === 'POST' && path === '/v1/load_lora_adapter') {
      if (f.failLoads > 0) {
        f.failLoads--;
        const name = (JSON.parse(body) as { lora_name?: string }).lora_name ?? '';
        const failed = loadFailure(replica, f.failure, name);
        // An engine failure costs the load's time; the others are refused before it.
        this.clock.after(f.failure === 'engine' ? this.o.loadMs : 0, () => {
          if (settled) return;
          const failure: FailedLoad = {
            at: this.clock.now(),
            clockAt: senderClock.now(),
            url: origin,
            name,
            sender,
          };
          this.failedLoads.push(failure);
          settle({ ...answer(failed), failure, readAfter: f.failure === 'engine' });
        });
        return { reply, abort: reset };
      }
      if (now < f.slowLoadUntil) {
        this.clock.after(f.slowLoadMs, () => forward());
        return { reply, abort: reset };
      }
    }
    forward();
    return { reply, abort: reset };
  }

  /**
   * A process's HTTP to the replicas: each call takes 0-2 ms each way (seeded, `trip`), goes
   * through the replica's faults and is bounded by `timeoutMs` on `clock`. `alive`: a dead
   * process's calls are never answered (its pending work just stops). On a slow path from node
   * `node`'s host to the replica, each way takes `hopMs` more.
   */
  http(clock: Clock, random: Random, alive: () => boolean, sender = '', node = -1): ReplicaHttp {
    const call = (
      method: 'GET' | 'POST',
      url: string,
      timeoutMs: number,
      body?: unknown,
    ): Promise<HttpReply> => {
      const u = urlParts(url);
      // A registry read: it answers for the failed loads its sender heard there since its last one.
      const deciding =
        method === 'GET' && u.pathname === '/v1/models' ? this.takeUnread(sender, u.origin) : NONE;
      return new Promise<HttpReply>((resolve, reject) => {
        let settled = false;
        const hop = this.hopMs(node, u.origin);
        const slowEnded = hop > 0 ? this.slowCallSeen(hop) : () => undefined;
        const cancel = clock.after(timeoutMs, () => {
          if (settled) return;
          settled = true;
          slowEnded();
          abort();
          reject(new BackendError('timeout', `${method} ${url}: no answer within ${timeoutMs} ms`));
        });
        let abort = () => {};
        // No slow path: the call as before, in the same instant (the seeds found stay).
        const onPath = (fn: () => void) => (hop > 0 ? void clock.after(hop, fn) : fn());
        trip(clock, random, () =>
          onPath(() => {
            if (settled || !alive()) return;
            const x = this.exchange(
              u.origin,
              method,
              u.pathname,
              body === undefined ? '' : JSON.stringify(body),
              sender,
              clock,
            );
            abort = x.abort;
            void x.reply.then((r) => {
              trip(clock, random, () =>
                onPath(() => {
                  if (settled || !alive()) return;
                  settled = true;
                  slowEnded();
                  cancel();
                  // The router starts its backoff now, on its clock.
                  if (r.failure) this.heard(r.failure, clock.now(), r.readAfter === true);
                  for (const f of deciding) f.listedAfter = r.status === 200 && lists(r.text, f.name);
                  if (r.status === 0)
                    reject(new BackendError('connect', `${method} ${url}: ECONNRESET: ${r.text}`));
                  else resolve(r);
                }),
              );
            });
          }),
        );
      });
    };
    return { call, close: async () => undefined } as unknown as ReplicaHttp;
  }

  /**
   * `failure` reached its sender at `clockAt` on its clock; `readAfter`: its next registry read there
   * answers for it.
   */
  private heard(failure: FailedLoad, clockAt: number, readAfter: boolean): void {
    failure.heardClockAt = clockAt;
    if (!readAfter) return;
    const key = `${failure.sender}\u0000${failure.url}`;
    const waiting = this.unread.get(key);
    if (waiting) waiting.push(failure);
    else this.unread.set(key, [failure]);
  }

  private takeUnread(sender: string, origin: string): readonly FailedLoad[] {
    const key = `${sender}\u0000${origin}`;
    const waiting = this.unread.get(key);
    if (!waiting) return NONE;
    this.unread.delete(key);
    return waiting;
  }
}

/** Whether a `/v1/models` text lists adapter `name` (an unreadable one lists nothing). */
function lists(text: string, name: string): boolean {
  try {
    return parseModels(text).adapters.some((a) => a.name === name);
  } catch {
    return false;
  }
}

/**
 * What Kong's proxy got: the status its log phase sees, the replica's body ('' for the gateway's
 * own) and `kong.response.get_source()`: 'error' for Kong's own 502 and 504 (nginx's error_page
 * 500 502 503 504 runs `Kong.handle_error`, which sets `ctx.KONG_UNEXPECTED`), 'service' for
 * whatever the replica answered, its own 5xx included (Kong does not intercept an upstream's
 * errors). Kong/kong 3.9.3 kong/pdk/response.lua `get_source`, kong/init.lua `handle_error`,
 * kong/templates/nginx_kong.lua.
 */
export interface ProxyAnswer {
  status: number;
  text: string;
  source: 'error' | 'service';
}

/** A client gone (Kong logs 499): when, and how the replica comes to stop its request (dst/client-draw.ts). */
export interface ClientGone {
  at: number;
  /** Gone before proxying began: the upstream closed before the request was written. */
  unwritten: boolean;
  /** ms from the close reaching the replica to its engine stopping the request. */
  noticeMs: number;
}

/** A connection refused or reset is Kong's 502, with no body of the replica's. */
function proxyAnswer(r: Exchanged): ProxyAnswer {
  return r.status === 0
    ? { status: 502, text: '', source: 'error' }
    : { status: r.status, text: r.text, source: 'service' };
}

/** A URL's origin and path, parsed once per distinct URL (a few dozen a world; `new URL` per call cost ~1% of a schedule). */
const parsedUrls = new Map<string, { origin: string; pathname: string }>();
const URLS_KEPT = 4096;

export function urlParts(url: string): { origin: string; pathname: string } {
  let u = parsedUrls.get(url);
  if (!u) {
    if (parsedUrls.size >= URLS_KEPT) parsedUrls.clear();
    const parsed = new URL(url);
    parsedUrls.set(url, (u = { origin: parsed.origin, pathname: parsed.pathname }));
  }
  return u;
}

function answer(e: SimError): Exchanged {
  return { status: e.status, text: typeof e.body === 'string' ? e.body : JSON.stringify(e.body) };
}

/** vLLM's answers to a failed load, released form (docs/replica-apis.md, sim/http/vllm-lora.ts). */
function loadFailure(r: SimReplica, why: LoadFailure, name: string): SimError {
  const prefix = 'Call to add_lora method failed: ';
  switch (why) {
    case 'not-found':
      return r.error(
        404,
        'NotFoundError',
        `${prefix}Loading lora ${name} failed: No adapter found for /adapters/${name}`,
      );
    case 'rank':
      return r.error(400, 'BadRequestError', `${prefix}LoRA rank 128 is greater than max_lora_rank 64.`);
    case 'engine':
      return r.error(
        500,
        'InternalServerError',
        `${prefix}Loading lora ${name} failed: CUDA out of memory. Tried to allocate 64.00 MiB`,
      );
  }
}

/**
 * A `/metrics` text broken as a proxy or a half-written buffer breaks it: label quotes gone, a
 * line cut short and joined with the next, or a page of something else with status 200.
 */
function garble(text: string, n: number): string {
  switch (n % 3) {
    case 0:
      return text.replace(/="/g, '=').replace(/",/g, ',');
    case 1: {
      const lines = text.split('\n');
      return lines.map((l, i) => (i % 7 === 3 ? l.slice(0, l.length >> 1) : l)).join('\n');
    }
    default:
      return '<html><body><h1>502 Bad Gateway</h1></body></html>';
  }
}
