/**
 * One replica's state in the work model: the requests this router admitted there, in admission
 * order, and the prefill they queue, drained at the replica's learned rate (FIFO, as vLLM
 * schedules). Apart from the model (work-model.ts) because the other parts read the same few
 * operations on it: learning from scrapes (scrape-learning.ts) and the waits (waits.ts).
 */
import { Ewma } from './ewma';

/** A learned rate stays within this factor of the prior: one odd interval cannot zero it. */
export const RATE_BOUND = 20;
export const RATE_ALPHA = 0.2;

export interface Entry {
  id: string;
  url: string;
  /** Its prefill: the prompt past a credited prefix. */
  prompt: number;
  /** The KV it reserves: its whole prompt (a cached prefix included) and max tokens. */
  kv: number;
  maxTokens: number;
  at: number;
  /** Cumulative admitted prompt tokens on its replica once this one's prefill ends (FIFO). */
  end: number;
  /** When its prefill was predicted to end, at admission. */
  prefillEndAt: number;
  /** Its class priority (0 without one). */
  priority: number;
  /** An idle scrape's first-token count took it as prefilled: a later one does not count it again. */
  counted?: boolean;
  /** Its neighbours in its replica's EntryList while admitted there (admitted before it, after it). */
  older: Entry | undefined;
  younger: Entry | undefined;
}

/**
 * A replica's admitted entries in admission order, as a list through the entries themselves. A
 * Map emptied and filled again per request (one request at a time) reallocated its hash table
 * on each emptying delete, through a call into V8's runtime: cache-cold in the plugin server, the
 * dearest line of a log phase (bench/access-log-ab.ts).
 */
export class EntryList {
  oldest: Entry | undefined = undefined;
  youngest: Entry | undefined = undefined;
  size = 0;

  add(e: Entry): void {
    e.older = this.youngest;
    e.younger = undefined;
    if (this.youngest === undefined) this.oldest = e;
    else this.youngest.younger = e;
    this.youngest = e;
    this.size++;
  }

  delete(e: Entry): void {
    const { older, younger } = e;
    if (older === undefined) this.oldest = younger;
    else older.younger = younger;
    if (younger === undefined) this.youngest = older;
    else younger.older = older;
    e.older = e.younger = undefined;
    this.size--;
  }

  /** In admission order, for the tools (bench/des); the request path walks the links. */
  *values(): IterableIterator<Entry> {
    for (let e = this.oldest; e !== undefined; ) {
      const younger = e.younger;
      yield e;
      e = younger;
    }
  }
}

export class ReplicaState {
  rate: Ewma;
  admitted = 0;
  drained = 0;
  drainedAt = 0;
  kvReserved = 0;
  readonly entries = new EntryList();
  implied: { tokens: number; at: number } | null = null;
  impliedKv = 0;
  kvCapacity: number | undefined;
  /** Requests the last scrape reported waiting, and ours admitted (+1) or ended (-1) since. */
  scrapedWaiting = 0;
  scrapedRunning = 0;
  sinceScrape = 0;
  /**
   * The last scrape's prefill histogram sums of finished requests: tokens (computed ones where
   * the replica exports them, else prompt tokens), seconds.
   */
  prefill: { tokens: number; prompt: number; seconds: number; computed: boolean; requests?: number } | null =
    null;
  /** Its last rate sample had each request's last prefill step taken out (`prefillStepMs`). */
  stepApart = false;
  /** Its rate was learned from prompt tokens, prefix-cache hits included: a cached prefix is priced in already. */
  promptUnits = false;
  /**
   * `firstTokensTotal` when an idle scrape last accounted for every request of ours that had
   * reached the replica, and how many of ours completed since without being counted then: an
   * idle scrape clears no more than the count grew by less those (scrape-learning.ts).
   */
  firstTokensAccounted: number | undefined;
  completedUncounted = 0;
  /** And its decode histogram sums: generated tokens, requests, seconds. */
  decode: { tokens: number; requests: number; seconds: number } | null = null;
  constructor(prior: number) {
    this.rate = new Ewma(prior, RATE_ALPHA);
  }
}

/** Drains `r`'s queued prefill up to `now` at its learned rate. */
export function advance(r: ReplicaState, now: number): void {
  if (now > r.drainedAt && r.admitted > r.drained)
    r.drained = Math.min(r.admitted, r.drained + (r.rate.value * (now - r.drainedAt)) / 1000);
  if (now > r.drainedAt) r.drainedAt = now;
}

/** `WorkModel.queuedPrefill` on a replica advanced to `now`. */
export function queued(r: ReplicaState, now: number): number {
  const own = r.admitted - r.drained;
  const imp = r.implied;
  const implied = imp ? imp.tokens - (r.rate.value * Math.max(0, now - imp.at)) / 1000 : 0;
  return Math.max(own, implied, 0);
}

/**
 * When a request of ours on `r` is predicted to end: its prefill (still queued: at the
 * replica's rate from now; done: when it was predicted to end) plus its max tokens at the
 * decode rate (`decodeMsPerToken`). The replica's clock, not ours, says when decoding began: a
 * request whose prefill ended seconds ago has that much less to decode.
 */
export function endAt(r: ReplicaState, e: Entry, now: number, decodeMsPerToken: number): number {
  const prefillEnd = e.end > r.drained ? now + ((e.end - r.drained) / r.rate.value) * 1000 : e.prefillEndAt;
  return prefillEnd + e.maxTokens * decodeMsPerToken;
}
