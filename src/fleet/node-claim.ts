/**
 * The node's claim: the replicas this process routes to, the union of its live router
 * configurations' replicas. Kong never says a configuration is gone (CloseInstance calls nothing
 * in the plugin: kong-pdk 0.6.0 server.js), so what the runtime knows is what registered: a
 * configuration is superseded once another one registers with its key (Kong's `__plugin_id`,
 * stable across changes of one plugin entity), and a superseded one stays live while a worker
 * still routes through it, until it has been unused for the lapse grace.
 */
import type { ReplicaSettings } from '../runtime-settings';

/**
 * The least a superseded configuration is kept unused: kong-pdk drops an instance idle for 60 s
 * (0.6.0 server.js `clearExpiredPlugins`, `expireTtl || 60`), so a worker's old instance that
 * may still see a request is kept that long at least.
 */
export const MIN_LAPSE_MS = 60_000;

/** One configuration's registration: its replicas and what it asks of them. */
export class ConfigClaim {
  /**
   * Another configuration of its key registered since: its requests then mark it used. A plain
   * field: the request path reads it on every request and does nothing more while it is false.
   */
  superseded = false;
  /** When it was superseded or a request last went through it since (monotonic ms). */
  usedAt = 0;
  /** Superseded and unused for the grace: its replicas are no longer claimed for it. */
  lapsed = false;
  /**
   * Kong's `__seq__` of its latest registration (node-wide, growing: plugins_iterator.lua
   * `get_plugin_config`), if Kong sent one: which of two configurations of a key is the newer.
   */
  seq: number | undefined = undefined;

  constructor(
    /** Kong's `__plugin_id`, or the configuration's own JSON without one (never superseded then). */
    readonly key: string,
    /** The configuration as JSON: a registration of the same one (another worker's instance) is this one. */
    readonly content: string,
    readonly urls: readonly string[],
    readonly settings: ReplicaSettings,
    /** Registration order: the latest registered configuration's settings win for a replica. */
    public order: number,
  ) {}
}

/** The live configurations of one runtime, by key, and the superseded ones not lapsed yet. */
export class NodeClaim {
  private readonly live = new Map<string, ConfigClaim>();
  private superseded: ConfigClaim[] = [];
  private registered = 0;
  /**
   * Replicas some configuration listed and none lists now: they were this node's and are no
   * more. A replica never claimed (registered in the store by another way) is not one of these.
   * One leaves once claimed again or once the store's list no longer names it (`listed`).
   */
  private readonly released = new Set<string>();
  /** Each claimed replica's settings: the latest registered live configuration listing it wins. */
  private settings = new Map<string, ReplicaSettings>();
  /**
   * Keys whose newer configuration registered on another runtime (`movedAway`), with its
   * `__seq__`: an older one registering here is only used, as if that one were live here.
   */
  private readonly away = new Map<string, number>();

  /**
   * Registers a configuration now (`nowMono`: monotonic ms), superseding the live one of its key if
   * it differs. One superseded before under this key is the same object again: with a lower
   * `seq` than the live one's (a worker's log phase starts an old-config instance:
   * harness/kong/workers.ts `instanceId`) it is only used; otherwise (a configuration changed back,
   * or no `__seq__` to tell) it is live again.
   */
  register(
    key: string,
    content: string,
    urls: readonly string[],
    settings: ReplicaSettings,
    nowMono: number,
    /** Kong's `__seq__`, if sent. */
    seq?: number,
  ): ConfigClaim {
    const current = this.live.get(key);
    const newer = current?.seq ?? this.away.get(key);
    let claim = current?.content === content ? current : undefined;
    if (!claim) {
      const old = this.superseded.find((c) => c.key === key && c.content === content);
      // An older configuration than the live one (Kong starts an old-config instance for the log
      // phase of a request begun before a reload: plugin.lua 3.9.3 `get_instance_id`): used, not
      // live again. Live again, it superseded the newer one, which lapsed once idle (its replicas
      // forgotten while Kong routes there) while the old one stayed claimed for good.
      // Lapsed already (a request longer than the grace; its log phase comes after), it is kept
      // no more: it comes back superseded, for the grace from now.
      if (seq !== undefined && newer !== undefined && seq < newer) {
        if (old) {
          this.used(old, nowMono);
          return old;
        }
        const back = new ConfigClaim(key, content, urls, settings, 0);
        back.seq = seq;
        this.supersede(back, nowMono);
        for (const u of urls) this.released.delete(u);
        this.recompute();
        return back;
      }
      this.away.delete(key);
      claim = old;
      if (claim) this.superseded = this.superseded.filter((c) => c !== claim);
      claim ??= new ConfigClaim(key, content, urls, settings, 0);
      claim.superseded = false;
      claim.lapsed = false;
      if (current) this.supersede(current, nowMono);
      this.live.set(key, claim);
    }
    claim.order = ++this.registered;
    if (seq !== undefined) claim.seq = Math.max(claim.seq ?? seq, seq);
    for (const u of urls) this.released.delete(u);
    this.recompute();
    return claim;
  }

  /**
   * Adds another runtime's configurations not registered here (a replaced runtime's), the same
   * objects, at `nowMono`. One whose key has another configuration live here (a change to other
   * state registers the successor's before it adopts) is superseded by it, for the grace from now:
   * a worker may still route through it.
   */
  adopt(from: NodeClaim, nowMono: number): void {
    for (const c of [...from.live.values()].sort((a, b) => a.order - b.order)) {
      const here = this.live.get(c.key);
      if (!here) this.live.set(c.key, c);
      else if (here.content !== c.content && !this.superseded.includes(c)) this.supersede(c, nowMono);
    }
    for (const c of from.superseded) if (!this.superseded.includes(c)) this.superseded.push(c);
    for (const [k, seq] of from.away)
      if (!this.live.has(k)) this.away.set(k, Math.max(seq, this.away.get(k) ?? seq));
    for (const u of from.released) if (!this.claims(u)) this.released.add(u);
    this.recompute();
  }

  /**
   * The configuration of `key` with `__seq__` `seq` registered on another runtime (its plugin
   * moved to another `redis` record: runtime-registry.ts): the live one here is superseded at
   * `nowMono`, kept for the grace while a worker may still route through it, as a change on this
   * runtime would.
   */
  movedAway(key: string, seq: number, nowMono: number): void {
    this.away.set(key, Math.max(seq, this.away.get(key) ?? seq));
    const c = this.live.get(key);
    if (!c) return;
    this.live.delete(key);
    this.supersede(c, nowMono);
    this.recompute();
  }

  /**
   * Superseded configurations unused for `graceMs` lapse; returns the replicas no live
   * configuration lists any more because of it (released).
   */
  lapse(nowMono: number, graceMs: number): string[] {
    const lapsed = this.superseded.filter((c) => nowMono - c.usedAt >= graceMs);
    if (lapsed.length === 0) return [];
    this.superseded = this.superseded.filter((c) => nowMono - c.usedAt < graceMs);
    for (const c of lapsed) c.lapsed = true;
    this.recompute();
    const out = [...new Set(lapsed.flatMap((c) => c.urls))].filter((u) => !this.settings.has(u));
    for (const u of out) this.released.add(u);
    return out;
  }

  /**
   * A request went through superseded `claim` at `nowMono`: live for the grace from then. One
   * lapsed already (a worker's instance Kong had not dropped) is live again: returns true then.
   */
  used(claim: ConfigClaim, nowMono: number): boolean {
    claim.usedAt = nowMono;
    if (!claim.lapsed) return false;
    claim.lapsed = false;
    this.superseded.push(claim);
    for (const u of claim.urls) this.released.delete(u);
    this.recompute();
    return true;
  }

  /** Whether a live configuration lists `url`. */
  claims(url: string): boolean {
    return this.settings.has(url);
  }

  /** Whether a live configuration (not superseded) lists `url`: its spec is the one to register. */
  listedByNewest(url: string): boolean {
    for (const c of this.live.values()) if (c.urls.includes(url)) return true;
    return false;
  }

  /** Whether `url` was this node's and no live configuration lists it now. */
  releases(url: string): boolean {
    return this.released.has(url);
  }

  /** Forgets the released replicas the store no longer lists (forgotten there). */
  listed(urls: ReadonlySet<string>): void {
    for (const u of this.released) if (!urls.has(u)) this.released.delete(u);
  }

  /** The claimed replicas with their settings. */
  get replicas(): ReadonlyMap<string, ReplicaSettings> {
    return this.settings;
  }

  /** Configurations kept: live and superseded not lapsed (tests, the report). */
  get size(): { live: number; superseded: number; released: number } {
    return { live: this.live.size, superseded: this.superseded.length, released: this.released.size };
  }

  private supersede(c: ConfigClaim, nowMono: number): void {
    c.superseded = true;
    c.usedAt = nowMono;
    this.superseded.push(c);
  }

  private recompute(): void {
    // A live configuration listing a replica sets it over any superseded one: an adopted superseded
    // configuration's order was counted on its old runtime, and could outrank the live one here.
    const byOrder = (cs: ConfigClaim[]) => cs.sort((a, b) => a.order - b.order);
    const all = [...byOrder([...this.superseded]), ...byOrder([...this.live.values()])];
    const settings = new Map<string, ReplicaSettings>();
    for (const c of all) for (const u of c.urls) settings.set(u, c.settings);
    this.settings = settings;
  }
}
