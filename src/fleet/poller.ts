import { monotonic, type Clock } from '../clock';
import { BackendError } from '../backends/errors';
import { DEFAULT_UNHEALTHY_TIMEOUTS } from '../config/poller-schema';
import type { ReplicaApi } from '../backends/replica-api';
import type { ReplicaCheck } from '../doctor/check';
import { replicaLines } from '../doctor/report';
import type { Logger } from '../log';
import type { ReplicaLoad } from '../metrics/replica-load';
import type { Random } from '../random';
import type { FleetStore } from './store';
import type { ReplicaSpec } from './types';

export interface PollerOptions {
  intervalMs: number;
  /** Bound on one poll of one replica (its /metrics and registry calls together). */
  timeoutMs: number;
  /** Each interval varies by up to this fraction, so many Kong nodes do not poll in step. */
  jitter: number;
  /** In-flight leases older than this are reclaimed (their log phase never came). */
  leaseMaxAgeMs: number;
  /**
   * Polls in a row that must time out before the replica is marked down (default
   * DEFAULT_UNHEALTHY_TIMEOUTS). A refused
   * connection or an error answer marks it down at once: only slowness gets the benefit of the
   * doubt; a successful poll starts the count again. Kong's healthchecks count timeouts against
   * a threshold of their own, apart from TCP and HTTP failures
   * (`healthchecks.active.unhealthy.timeouts`, kong/db/schema/entities/upstreams.lua
   * `healthchecks_config`, Kong 3.9.3: default 0, which disables the count, so by default a
   * timeout never takes a Kong target down), and a success there also clears every failure
   * counter (`incr_counter`, lib/resty/healthcheck.lua, lua-resty-healthcheck 3.1.0).
   */
  unhealthyTimeouts?: number;
}

/** A read of the store's replica list: `specs` once it answered. */
interface Listing {
  specs: ReplicaSpec[] | null;
  answered: Promise<ReplicaSpec[]>;
}

export interface PollStats {
  polls: number;
  errors: number;
  /** Leases reclaimed after lease_max_age_ms: their log phase never came (Kong skipped it, or a node died). */
  leasesExpired: number;
}

/** Whether two specs of one url are scraped alike: the backend picks the API (http-replica-api.ts `scrape`). */
function sameScrape(a: ReplicaSpec, b: ReplicaSpec): boolean {
  return a.backend === b.backend;
}

/**
 * Keeps the store's snapshots fresh: every registered replica each interval, never two polls
 * of one replica at once (a slow replica is skipped while its poll is still running).
 */
export class Poller {
  private inFlight = new Map<string, Promise<void>>();
  /** Polls of each replica that timed out in a row since its last answer. */
  private readonly timeoutsInRow = new Map<string, number>();
  private cancel: (() => void) | null = null;
  readonly stats: PollStats = { polls: 0, errors: 0, leasesExpired: 0 };
  /** Each replica's last load figures as read, for the status page (where they came from, residency). */
  readonly lastLoad = new Map<string, ReplicaLoad>();
  /** Each replica's context length as it last reported it (vLLM /v1/models), for refusing longer requests. */
  readonly maxModelLen = new Map<string, number>();
  /** Whether some router configuration could have loaded this registry entry (see ReplicaSnapshot). */
  isManaged: ((name: string, path: string) => boolean) | null = null;
  /** Grows when the set of router configurations behind `isManaged` changes. */
  managedVersion = 0;
  /**
   * The preflight check of a replica (src/doctor), run once per replica when the poller first
   * meets it; null where replicas are not reached over HTTP (the benchmark's engine model).
   */
  preflight: ((spec: ReplicaSpec) => Promise<ReplicaCheck>) | null = null;
  /**
   * Told of each answered poll's reading, and awaited, before the poll's listeners (a trim after
   * the poll must see what it starts): the unseen hold (src/adapters/unseen-busy.ts). `startedMono`:
   * when the poll began, on the clock's monotonic time line (`monotonic`), which no skew steps.
   */
  onReading: ((url: string, load: ReplicaLoad, startedMono: number) => Promise<void>) | null = null;
  /** Each replica's preflight check, for `/lora/status`, once it has finished. */
  readonly preflightChecks = new Map<string, ReplicaCheck>();
  private readonly preflightStarted = new Set<string>();
  /** Told after each poll with its outcome (metrics, trimming). */
  private readonly pollListeners: ((url: string, ok: boolean, ms: number) => void)[] = [];
  /** Told how many leases a round reclaimed by age (metrics). */
  private readonly expiryListeners: ((count: number) => void)[] = [];
  /** Told after each timed round over every replica (prefetching). */
  private readonly roundListeners: (() => void)[] = [];
  /** The replica list as the store last gave it: a round polls these at once (null: none read yet). */
  private listed: ReplicaSpec[] | null = null;
  /** List reads asked so far, and the one whose answer `listed` holds: an older answer never replaces it. */
  private listsAsked = 0;
  private listKept = 0;

  constructor(
    private readonly store: FleetStore,
    private readonly api: ReplicaApi,
    private readonly clock: Clock,
    private options: PollerOptions,
    private readonly random: Random,
    private readonly log: Logger,
  ) {}

  get intervalMs(): number {
    return this.options.intervalMs;
  }

  get timeoutMs(): number {
    return this.options.timeoutMs;
  }

  get leaseMaxAgeMs(): number {
    return this.options.leaseMaxAgeMs;
  }

  /** Adds a listener told after each poll; the others keep theirs. */
  addPollListener(fn: (url: string, ok: boolean, ms: number) => void): void {
    this.pollListeners.push(fn);
  }

  /** Adds a listener told how many leases a round reclaimed; the others keep theirs. */
  addExpiryListener(fn: (count: number) => void): void {
    this.expiryListeners.push(fn);
  }

  /** Adds a listener told after each timed round; the others keep theirs. */
  addRoundListener(fn: () => void): void {
    this.roundListeners.push(fn);
  }

  get running(): boolean {
    return this.cancel !== null;
  }

  configure(options: Partial<PollerOptions>): void {
    this.options = { ...this.options, ...options };
  }

  start(): void {
    if (this.cancel) return;
    this.schedule();
  }

  stop(): void {
    this.cancel?.();
    this.cancel = null;
  }

  /** Whether a poll of `url` is under way: begun, its reading not yet judged (`onReading`). */
  polling(url: string): boolean {
    return this.inFlight.has(url);
  }

  /**
   * Whether a round leaves `url` out (set by the runtime: a replica this node left, which no other
   * node may route to). Never asked of a replica never claimed: the store's list rules those.
   */
  skips: ((url: string) => boolean) | null = null;
  /** Awaited at the end of each round, after the lease expiry (the runtime's departures). */
  afterRound: (() => Promise<void>) | null = null;

  /** The replicas of the store's last list read (null: none answered yet). */
  listedUrls(): string[] | null {
    return this.listed?.map((s) => s.url) ?? null;
  }

  /**
   * Drops what is kept of `url` (a replica that left): its readings, context length, preflight
   * check, timeouts in a row. False, and nothing dropped, while a poll of it is under way.
   */
  forget(url: string): boolean {
    if (this.inFlight.has(url)) return false;
    this.timeoutsInRow.delete(url);
    this.lastLoad.delete(url);
    this.maxModelLen.delete(url);
    this.preflightChecks.delete(url);
    this.preflightStarted.delete(url);
    if (this.listed?.some((s) => s.url === url)) this.listed = this.listed.filter((s) => s.url !== url);
    return true;
  }

  /** Polls one replica now, or joins the poll already under way. */
  refresh(spec: ReplicaSpec): Promise<void> {
    return this.begin(spec);
  }

  /** `refresh`; `listing`: the list read its spec may be gone from by the time it writes. */
  private begin(spec: ReplicaSpec, listing?: Listing): Promise<void> {
    const running = this.inFlight.get(spec.url);
    if (running) return running;
    const p = this.poll(spec, listing).finally(() => this.inFlight.delete(spec.url));
    this.inFlight.set(spec.url, p);
    return p;
  }

  /**
   * A poll of one replica that starts from now: waits out a poll under way (it may have read the
   * replica before what the caller just learned), then polls or joins the next one.
   */
  async refreshAfresh(spec: ReplicaSpec): Promise<void> {
    await this.inFlight.get(spec.url);
    await this.refresh(spec);
  }

  /** `refresh` (or, `afresh`, `refreshAfresh`) of the replica registered at `url`; nothing if none is. */
  async refreshUrl(url: string, afresh = false): Promise<void> {
    const listing = this.readSpecs();
    // Known from the last list: polled at once, as a round does (`pollAll`).
    let spec = (this.listed ?? (await this.localSpecs())).find((s) => s.url === url);
    if (spec) listing.answered.catch(() => undefined);
    else spec = (await listing.answered).find((s) => s.url === url);
    if (!spec || this.skips?.(url)) return;
    if (afresh) await this.inFlight.get(url);
    await this.begin(spec, listing);
    // Registered again with another backend: that poll wrote nothing if the fresh list came
    // first (`stale`): it is polled by the fresh spec. Else the next round polls it so.
    const fresh = listing.specs?.find((s) => s.url === url);
    if (fresh && !sameScrape(fresh, spec)) await this.refreshAfresh(fresh);
  }

  /**
   * One round over every registered replica. Those the last list had are polled at once, beside
   * the list's read: cut off from Redis, that read waits out the command timeout before the
   * failover store answers from its local copy, and a node deciding alone saw a replica go down
   * that much later (dst seed 1729199). Those the fresh list adds are polled once it answers.
   * Before any list answered, those the failover store's local copy has (`localSpecs`). One it
   * has with another backend (registered again) is polled again by its fresh spec, after the poll
   * by the old one (which wrote nothing if the list came first: `stale`).
   */
  async pollAll(): Promise<void> {
    const listing = this.readSpecs();
    const known = this.listed ?? (await this.localSpecs());
    const knownSpecs = new Map(known.map((s) => [s.url, s]));
    const added = (specs: ReplicaSpec[]) => specs.filter((s) => !knownSpecs.has(s.url));
    const changed = (specs: ReplicaSpec[]) =>
      specs.filter((s) => {
        const old = knownSpecs.get(s.url);
        return old !== undefined && !sameScrape(old, s);
      });
    await Promise.all([
      this.pollEach(known, listing),
      listing.answered.then((specs) => {
        const again = changed(specs);
        if (again.length === 0) return this.pollEach(added(specs));
        return Promise.all([this.pollEach(added(specs)), ...again.map((s) => this.refreshAfresh(s))]);
      }),
    ]);
    const expired = await this.store.expireLeases(this.clock.now(), this.options.leaseMaxAgeMs);
    this.stats.leasesExpired += expired.length;
    if (expired.length > 0) for (const fn of this.expiryListeners) fn(expired.length);
    for (const l of expired) {
      this.log.warn(
        `reclaimed in-flight lease ${l.id} (${l.adapter ?? 'base'} on ${l.url}): its log phase never came (held over ${this.options.leaseMaxAgeMs} ms, or its Kong node stopped)`,
      );
    }
    await this.afterRound?.();
  }

  /**
   * Before any list answered, the replicas known without a round trip: the failover store's local
   * copy (a node's first round, cut off from Redis, waited out the timeout too: dst seed 1729199's
   * node 2, its first round at 1,014 ms).
   */
  private async localSpecs(): Promise<ReplicaSpec[]> {
    return (await this.store.localReplicaSpecs?.()) ?? [];
  }

  /** Polls each of `specs` not under way already. */
  private pollEach(specs: readonly ReplicaSpec[], listing?: Listing): Promise<void[]> {
    const skips = this.skips;
    return Promise.all(
      specs.filter((s) => !this.inFlight.has(s.url) && !skips?.(s.url)).map((s) => this.begin(s, listing)),
    );
  }

  /** Reads the store's replica list, kept for the next round once it answers (the newest read's). */
  private readSpecs(): Listing {
    const n = ++this.listsAsked;
    const read = { specs: null as ReplicaSpec[] | null };
    const answered = this.store.replicaSpecs().then((specs) => {
      read.specs = specs;
      if (n > this.listKept) {
        this.listKept = n;
        this.listed = specs;
      }
      return specs;
    });
    return Object.assign(read, { answered });
  }

  /**
   * Whether a poll of `spec` begun under `listing` (from the list before it) must write nothing:
   * the fresh list has answered without its replica (gone from the shared state: a FLUSHALL, say),
   * or with another backend for it (registered again: the scrape read it with the wrong API). The
   * stores ignore a snapshot of a replica they do not know (memory-store.ts `applySnapshot`, the
   * `snapshot` script's `known`); the poller's own records and listeners are skipped here.
   */
  private stale(spec: ReplicaSpec, listing: Listing | undefined): boolean {
    const specs = listing?.specs;
    if (!specs) return false;
    const fresh = specs.find((s) => s.url === spec.url);
    return fresh === undefined || !sameScrape(fresh, spec);
  }

  /**
   * The shared clock when a poll began, read beside its scrape rather than before it: read before,
   * it held the scrape back a round trip, and a whole timeout when Redis had just gone. Its answer
   * less the local time the read took is no later than the shared clock at the poll's start (the
   * registry the scrape reads is at least that recent), however slow the read: the error is the
   * reply's way back, as when the read came first. Never rejects: undefined when it fails. The
   * read's time is measured on the monotonic clock: the wall clock stepped back during the read
   * (a skew correction) shortened it, and dated the poll after the registry it read.
   */
  private sharedStart(): Promise<number | undefined> {
    const begun = monotonic(this.clock);
    const read = this.store.sharedTime?.();
    if (!read) return Promise.resolve(undefined);
    return read.then(
      (t) => (t === undefined ? undefined : t - Math.max(0, monotonic(this.clock) - begun)),
      () => undefined,
    );
  }

  private schedule(): void {
    const { intervalMs, jitter } = this.options;
    const delay = intervalMs * (1 + jitter * (2 * this.random() - 1));
    this.cancel = this.clock.after(delay, () => {
      if (!this.cancel) return;
      // The next round is timed from this one's start: a slow replica does not slow the rest.
      this.schedule();
      this.pollAll()
        .then(() => {
          for (const fn of this.roundListeners) fn();
        })
        .catch((err: Error) => this.log.error(`poll round failed: ${err.message}`));
    });
  }

  /**
   * Once per replica: the same summary `kong-lora-router doctor` prints, in the log (a warning
   * when the replica is unfit) and on the status route. Never awaited by a poll.
   */
  private runPreflight(spec: ReplicaSpec): void {
    if (!this.preflight || this.preflightStarted.has(spec.url)) return;
    this.preflightStarted.add(spec.url);
    this.preflight(spec).then(
      (check) => {
        this.preflightChecks.set(spec.url, check);
        const text = `preflight of replica ${replicaLines(check).join('\n')}`;
        if (check.fit) this.log.info(text);
        else this.log.warn(text);
      },
      (err: Error) => this.log.warn(`preflight of replica ${spec.url} failed: ${err.message}`),
    );
  }

  private async poll(spec: ReplicaSpec, listing?: Listing): Promise<void> {
    this.runPreflight(spec);
    const started = this.clock.now();
    const monoStarted = monotonic(this.clock);
    this.stats.polls++;
    const sharedStart = this.sharedStart();
    try {
      const s = await this.api.scrape(spec, this.options.timeoutMs);
      const sharedStartedAt = await sharedStart;
      if (this.stale(spec, listing)) return;
      this.timeoutsInRow.delete(spec.url);
      this.lastLoad.set(spec.url, s.load);
      if (s.maxModelLen !== undefined) this.maxModelLen.set(spec.url, s.maxModelLen);
      else this.maxModelLen.delete(spec.url);
      await this.store.applySnapshot(spec.url, {
        at: this.clock.now(),
        startedAt: started,
        sharedStartedAt,
        monoStartedAt: monoStarted,
        monoAt: monotonic(this.clock),
        ok: true,
        load: s.load,
        registry: s.registry,
        managed: this.isManaged ?? undefined,
        managedVersion: this.managedVersion,
        llamaAdapters: s.llamaAdapters,
      });
      await this.onReading?.(spec.url, s.load, monoStarted).catch((err: Error) =>
        this.log.warn(`could not judge the reading of ${spec.url}: ${err.message}`),
      );
      for (const fn of this.pollListeners) fn(spec.url, true, this.clock.now() - started);
    } catch (err) {
      this.stats.errors++;
      const sharedStartedAt = await sharedStart;
      if (this.stale(spec, listing)) return;
      if (this.givesBenefitOfDoubt(spec.url, err)) {
        this.log.warn(
          `poll of ${spec.url} timed out; it stays up until the next poll: ${(err as Error).message}`,
        );
        for (const fn of this.pollListeners) fn(spec.url, false, this.clock.now() - started);
        return;
      }
      await this.store.applySnapshot(spec.url, {
        at: this.clock.now(),
        startedAt: started,
        sharedStartedAt,
        monoStartedAt: monoStarted,
        monoAt: monotonic(this.clock),
        ok: false,
        error: (err as Error).message,
      });
      for (const fn of this.pollListeners) fn(spec.url, false, this.clock.now() - started);
    }
  }

  /** A timeout below the threshold: counted, and the replica keeps its last word. */
  private givesBenefitOfDoubt(url: string, err: unknown): boolean {
    if (!(err instanceof BackendError) || err.code !== 'timeout') {
      this.timeoutsInRow.delete(url);
      return false;
    }
    const n = (this.timeoutsInRow.get(url) ?? 0) + 1;
    this.timeoutsInRow.set(url, n);
    return n < (this.options.unhealthyTimeouts ?? DEFAULT_UNHEALTHY_TIMEOUTS);
  }
}
