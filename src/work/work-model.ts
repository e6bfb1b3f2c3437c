/**
 * The work model: per replica, what this router admitted and has not seen end, and what a
 * request sent there now would wait. Its parts each have a file: a replica's state and its FIFO
 * drain (replica-state.ts), what a scrape teaches (scrape-learning.ts), the waits for KV room and
 * a slot (waits.ts); this file keeps the admissions and the reads a prediction makes.
 */
import { EngineLoads } from './engine-loads';
import { Ewma } from './ewma';
import { advance, queued, RATE_ALPHA, ReplicaState, type Entry } from './replica-state';
import { learnFromScrape, type ReplicaFigures } from './scrape-learning';
import { kvWait, slotWait } from './waits';

export type { ReplicaFigures } from './scrape-learning';

/** Output tokens assumed for the KV a request holds when the client sets no limit. */
export const DEFAULT_MAX_TOKENS = 256;
/**
 * `awaitingFirstToken` counts a request this long past its predicted prefill end: the prediction
 * leaves out the hop from its load's end to the replica (the router sees the load end, checks the
 * replica's health, Kong proxies). Through the plugin server a batch load released at the
 * predicted end reached the replica 50 ms after the interactive request it waited for, and ran
 * before that request's first step (test/kong/slo-class-loads.test.ts).
 */
const FIRST_TOKEN_MARGIN_MS = 250;
/**
 * Of ours on `r`, how many wait for a running slot: the last scrape's queue and ours admitted (less
 * ours ended) since, as `slotWait` counts them; none when the scrape reported no queue.
 */
function waitingForSlot(r: ReplicaState): number {
  return r.scrapedWaiting > 0 ? Math.min(r.entries.size, Math.max(0, r.scrapedWaiting + r.sinceScrape)) : 0;
}

/** Prompt tokens assumed per waiting request a replica reports before anything is known. */
const PRIOR_PROMPT_TOKENS = 512;

export interface WorkOptions {
  /** Prior prefill rate of a replica, tokens per second, until it is measured. */
  prefillTokensPerS: number;
  /**
   * Prior decode time per output token of one request, ms (KV room frees as requests end), until
   * the replicas' decode histograms say it.
   */
  decodeMsPerToken?: number;
}

export interface Admission {
  id: string;
  url: string;
  promptTokens: number;
  maxTokens: number;
  at: number;
  /** Predicted wait before its prefill could start (a load, KV room): 0 when none. */
  startMs?: number;
  /** Of `promptTokens`, a prefix credited as cached there (`prefixCredit`): no prefill queued for it. */
  cachedTokens?: number;
  /** Its class priority (`slo_classes`; 0 without one): `awaitingFirstToken` counts by it. */
  priority?: number;
}

export interface ReplicaWork {
  /** Requests this router admitted and has not seen logged. */
  inFlight: number;
  /** Prompt tokens not yet prefilled: max of the router's own view and the replica-implied one. */
  queuedPrefillTokens: number;
  /** Of `inFlight`, those past their prefill (decoding). */
  decodeInFlight: number;
  /** KV the in-flight requests reserve (prompt + max tokens). */
  kvReservedTokens: number;
  prefillTokensPerS: number;
}

/** What a prediction reads of one replica (`WorkModel.outlook`). */
export interface Outlook {
  /** The wait for KV room or a running slot, whichever is longer (`kvWaitMs`, `slotWaitMs`). */
  waitMs: number;
  /** Prefill tokens a second (`prefillRate`). */
  rate: number;
  /** Prompt tokens queued ahead (`queuedPrefill`). */
  queuedTokens: number;
  /** `prefillStepMs`. */
  stepMs: number;
  /** `creditsPrefix`. */
  creditsPrefix: boolean;
  /** How long loads this router began there keep the engine stopped (`EngineLoads.stallMs`). */
  stallMs: number;
  /** How many loads this router began there are under way (`EngineLoads.count`). */
  ownLoads: number;
}

/**
 * Per replica, the work this router put there and the replica's own figures: prefill tokens
 * queued (drained at the replica's learned prefill rate, FIFO as vLLM schedules), requests
 * decoding, KV reserved. Fresher than any scrape, since it moves with every admission; the
 * scrape corrects it upward when another gateway shares the replica (its waiting requests
 * times their mean prompt), and clears it when the replica reports itself idle.
 */
export class WorkModel {
  private readonly replicas = new Map<string, ReplicaState>();
  private readonly byId = new Map<string, Entry>();
  private readonly meanPrompt = new Ewma(PRIOR_PROMPT_TOKENS, 0.05);
  private readonly meanMaxTokens = new Ewma(DEFAULT_MAX_TOKENS, 0.05);
  private readonly decodeMs: Ewma;
  private readonly scratch: Outlook = {
    waitMs: 0,
    rate: 0,
    queuedTokens: 0,
    stepMs: 0,
    creditsPrefix: true,
    stallMs: 0,
    ownLoads: 0,
  };
  /** The adapter loads under way per replica (the adapter manager tells, runtime-wiring.ts). */
  readonly engineLoads = new EngineLoads();

  constructor(private o: WorkOptions) {
    this.decodeMs = new Ewma(o.decodeMsPerToken ?? 25, 0.1);
  }

  /** A router configuration's prior: replicas not measured yet take it (the last configured wins). */
  configure(prefillTokensPerS: number): void {
    if (prefillTokensPerS === this.o.prefillTokensPerS) return;
    this.o = { ...this.o, prefillTokensPerS };
    for (const r of this.replicas.values())
      if (r.rate.count === 0) r.rate = new Ewma(prefillTokensPerS, RATE_ALPHA);
  }

  private replica(url: string): ReplicaState {
    let r = this.replicas.get(url);
    if (!r) this.replicas.set(url, (r = new ReplicaState(this.o.prefillTokensPerS)));
    return r;
  }

  admit(a: Admission): void {
    // An id admitted again replaces its first entry, as the Map keyed by id did (never twice in a list).
    if (this.byId.has(a.id)) this.release(a.id, a.at);
    const r = this.replica(a.url);
    advance(r, a.at);
    const ahead = r.admitted - r.drained;
    // A request that waits for KV room (or a load) measures that wait, not the prefill rate.
    const startMs = (a.startMs ?? 0) + this.kvWaitMs(a.url, a.at, a.promptTokens + a.maxTokens);
    // Its queued prefill: the prompt past a prefix credited as cached there.
    const prefill = Math.max(0, a.promptTokens - (a.cachedTokens ?? 0));
    r.admitted += prefill;
    const e: Entry = {
      id: a.id,
      url: a.url,
      prompt: prefill,
      kv: a.promptTokens + a.maxTokens,
      maxTokens: a.maxTokens,
      at: a.at,
      end: r.admitted,
      prefillEndAt: a.at + startMs + ((ahead + prefill) / r.rate.value) * 1000,
      priority: a.priority ?? 0,
      older: undefined,
      younger: undefined,
    };
    r.entries.add(e);
    this.byId.set(a.id, e);
    r.kvReserved += e.kv;
    r.sinceScrape++;
    this.meanPrompt.observe(a.promptTokens);
    this.meanMaxTokens.observe(a.maxTokens);
  }

  /**
   * The log phase (or a failed admission): the request ended. Only a completed one (2xx) says
   * its prefill, and every one admitted before it on the replica, is done (FIFO); a failure (a
   * load error, no room, a 4xx, a 499) drops what is left of its own prefill and its KV only.
   */
  release(id: string, now: number, completed = false): void {
    const e = this.byId.get(id);
    if (!e) return;
    this.byId.delete(id);
    const r = this.replica(e.url);
    advance(r, now);
    if (completed) {
      r.drained = Math.max(r.drained, e.end);
      // Its first token is in the replica's count: the next idle scrape has that many fewer to clear.
      if (!e.counted) r.completedUncounted++;
    } else {
      const left = Math.min(e.prompt, Math.max(0, e.end - r.drained));
      if (left > 0) {
        r.admitted -= left;
        // Those admitted after it no longer queue behind its prefill (rare: failures only).
        for (let x = e.younger; x !== undefined; x = x.younger) x.end -= left;
      }
    }
    r.entries.delete(e);
    r.kvReserved -= e.kv;
    r.sinceScrape--;
    if (r.entries.size === 0) {
      // Nothing of ours left: start the next admission from a clean slate (no drift).
      r.admitted = r.drained = 0;
      r.kvReserved = 0;
    }
  }

  /**
   * A scrape of the replica at `at` (begun at `startedAt`): what it teaches is in
   * scrape-learning.ts (`learnFromScrape`).
   */
  observeReplica(url: string, f: ReplicaFigures, at: number, startedAt = at): void {
    const r = this.replica(url);
    advance(r, at);
    learnFromScrape(r, f, at, startedAt, {
      priorTokensPerS: this.o.prefillTokensPerS,
      meanPrompt: this.meanPrompt,
      decodeMs: this.decodeMs,
    });
  }

  /**
   * What a request's prefill costs on `url` beyond its computed tokens over the rate: one engine
   * step, where the rate was learned without it (computed tokens and the decode figures); 0 where
   * the rate has it in (prompt tokens, or the prior).
   */
  prefillStepMs(url: string): number {
    return this.replicas.get(url)?.stepApart ? this.decodeMs.value : 0;
  }

  /**
   * Whether a prefix cached on `url` shortens a prediction there: not where its rate was learned
   * from prompt tokens, which prices the replica's usual cache hits in already (crediting them
   * again would count them twice). The configured prior is a rate of computed tokens.
   */
  creditsPrefix(url: string): boolean {
    return this.replicas.get(url)?.promptUnits !== true;
  }

  /** Decode time per output token (ms), learned from the replicas' decode histograms. */
  decodeMsPerToken(): number {
    return this.decodeMs.value;
  }

  setKvCapacity(url: string, tokens: number): void {
    this.replica(url).kvCapacity = tokens;
  }

  prefillRate(url: string): number {
    return this.replicas.get(url)?.rate.value ?? this.o.prefillTokensPerS;
  }

  /**
   * Everything a prediction reads of `url` (src/work/predict.ts), for a request needing `need`
   * KV tokens: one lookup, not one per figure, as this runs per replica per decision. The same figures as `kvWaitMs`, `slotWaitMs`, `prefillRate`, `queuedPrefill`,
   * `prefillStepMs` and `creditsPrefix` called at `now`. Valid until the next call: one object
   * is reused (a decision over 64 replicas would otherwise make one per replica).
   */
  outlook(url: string, now: number, need: number): Readonly<Outlook> {
    const o = this.scratch;
    o.stallMs = this.engineLoads.stallMs(url, now);
    o.ownLoads = this.engineLoads.count(url);
    const r = this.replicas.get(url);
    if (!r) {
      o.waitMs = o.queuedTokens = o.stepMs = 0;
      o.rate = this.o.prefillTokensPerS;
      o.creditsPrefix = true;
      return o;
    }
    o.waitMs = Math.max(
      kvWait(r, now, need, this.decodeMs.value),
      slotWait(r, now, this.meanMaxTokens.value, this.decodeMs.value),
    );
    o.rate = r.rate.value;
    advance(r, now);
    o.queuedTokens = queued(r, now);
    o.stepMs = r.stepApart ? this.decodeMs.value : 0;
    o.creditsPrefix = !r.promptUnits;
    return o;
  }

  /**
   * This router's requests on `url` of priority above `abovePriority` still waiting for their
   * first token at `now`: prefill queued, or predicted to end later (a load before it counted),
   * or among the newest the replica reports waiting for a running slot (`waitingForSlot`): the
   * drain alone predicted their prefill done while they queued behind a full batch (issue 34, 1 s
   * loads, 50% load, seed 3: batch loads stalled 14 interactive requests, the count had seen 6).
   * An adapter load begun there now stops the engine under each of them for its whole time.
   */
  awaitingFirstToken(url: string, now: number, abovePriority: number): number {
    const r = this.replicas.get(url);
    if (!r) return 0;
    advance(r, now);
    // The newest of ours are the requests the replica reports waiting for a running slot (FIFO).
    const queuedFrom = r.entries.size - waitingForSlot(r);
    let n = 0;
    let i = 0;
    for (let e = r.entries.oldest; e !== undefined; e = e.younger) {
      const queued = i++ >= queuedFrom;
      if (
        e.priority > abovePriority &&
        (queued || e.prefillEndAt + FIRST_TOKEN_MARGIN_MS > now || e.end > r.drained)
      )
        n++;
    }
    return n;
  }

  /** Prompt tokens queued ahead of a request sent to `url` now. */
  queuedPrefill(url: string, now: number): number {
    const r = this.replicas.get(url);
    if (!r) return 0;
    advance(r, now);
    return queued(r, now);
  }

  /** How long a request needing `need` KV tokens waits for room on `url` (waits.ts `kvWait`). */
  kvWaitMs(url: string, now: number, need: number): number {
    const r = this.replicas.get(url);
    return r ? kvWait(r, now, need, this.decodeMs.value) : 0;
  }

  /** How long a request sent to `url` now waits for a running slot (waits.ts `slotWait`). */
  slotWaitMs(url: string, now: number): number {
    const r = this.replicas.get(url);
    return r ? slotWait(r, now, this.meanMaxTokens.value, this.decodeMs.value) : 0;
  }

  view(url: string, now: number): ReplicaWork {
    const r = this.replicas.get(url);
    const queuedPrefillTokens = this.queuedPrefill(url, now);
    let decodeInFlight = 0;
    if (r)
      for (let e = r.entries.oldest; e !== undefined; e = e.younger) if (e.end <= r.drained) decodeInFlight++;
    return {
      inFlight: r?.entries.size ?? 0,
      queuedPrefillTokens,
      decodeInFlight,
      kvReservedTokens: r?.kvReserved ?? 0,
      prefillTokensPerS: this.prefillRate(url),
    };
  }

  /** The replicas it keeps figures of (runtime-departures.ts: each one no longer listed is looked at). */
  urls(): IterableIterator<string> {
    return this.replicas.keys();
  }

  /**
   * Drops `url`'s figures (a replica that left); false, and nothing dropped, while a request
   * admitted there or a load there is still counted.
   */
  forget(url: string): boolean {
    if ((this.replicas.get(url)?.entries.size ?? 0) > 0 || this.engineLoads.busy(url)) return false;
    this.replicas.delete(url);
    return true;
  }

  /** Forgets requests admitted before `now - maxAgeMs`: their log phase never came (the lease expired). */
  purge(now: number, maxAgeMs: number): void {
    // `byId` is in admission order: the first young entry ends the walk (it runs every poll).
    for (const e of this.byId.values()) {
      if (now - e.at <= maxAgeMs) break;
      this.release(e.id, now);
    }
  }
}
