/**
 * Replicas that leave the fleet are forgotten, as the simulation explores it (dst/config-draw.ts:
 * router configuration changes; dst/forget-check.ts: the checks from the world's own records):
 * the draws leave every seed without them as it was, the checks hold on the real code over a
 * range of seeds that forget replicas and list them again, and each catches its planted bug: a
 * superseded configuration dropped while in use, a retain dropping other nodes' claims, a store
 * that never forgets, a forget that leaves a key of the replica behind; and, on a schedule made for
 * it (no drawn one reaches it), a retain that forgets a replica a lease is open on.
 */
import { FORGOTTEN_INVARIANT, KEPT_INVARIANT, keysOf, LEASED_INVARIANT } from '../../dst/forget-check';
import { DEFAULT_OPTIONS, runSchedule } from '../../dst/run';
import { generate, type Action, type Schedule, type ScheduleOptions } from '../../dst/schedule';
import type { Violation } from '../../dst/invariants';
import { NodeClaim } from '../../src/fleet/node-claim';
import { MemoryFleetStore } from '../../src/fleet/memory-store';
import { ReplicaClaims } from '../../src/fleet/replica-claims';

const CONFIG: ScheduleOptions = { ...DEFAULT_OPTIONS, configChanges: true };

/** The first seed of [from, to) with configuration changes that breaks an invariant, and what. */
async function firstBroken(from: number, to: number): Promise<{ seed: number; v: Violation } | undefined> {
  for (let seed = from; seed < to; seed++) {
    const s = generate(seed, CONFIG);
    if (!s.world.configChanges) continue;
    const r = await runSchedule(s);
    if (r.violation) return { seed, v: r.violation };
  }
  return undefined;
}

describe('configuration changes are drawn apart', () => {
  it('leave every seed without them as drawn before, and are off unless asked', () => {
    let drew = 0;
    for (let seed = 1; seed <= 300; seed++) {
      const before = generate(seed, DEFAULT_OPTIONS);
      const s = generate(seed, CONFIG);
      expect(before.world.configChanges).toBeUndefined();
      if (s.world.configChanges) {
        drew++;
        // The seed's own draws stay: its world but the changes, and its actions but the changes,
        // the requests after a change back and the stale-worker marks.
        const { configChanges: _, ...world } = s.world;
        expect(world).toEqual(before.world);
        const kept = s.actions.filter((a) => before.actions.some((b) => b.at === a.at && b.kind === a.kind));
        const unmarked = kept.map((a) => {
          const { onOldConfig: _o, ...rest } = a as Action & { onOldConfig?: boolean };
          return rest;
        });
        expect(unmarked).toEqual(expect.arrayContaining(before.actions));
      } else expect(s).toEqual(before);
    }
    expect(drew).toBeGreaterThan(20);
  });
});

describe('forgetting, explored', () => {
  it('holds over seeds 1-150 with changes, which forget replicas and list them again', async () => {
    let forgotten = 0;
    let listedAgain = 0;
    let worlds = 0;
    for (let seed = 1; seed <= 150; seed++) {
      const s = generate(seed, CONFIG);
      if (!s.world.configChanges) continue;
      const r = await runSchedule(s);
      expect({ seed, violation: r.violation }).toEqual({ seed, violation: undefined });
      worlds++;
      forgotten += r.forgets!.forgotten;
      listedAgain += r.forgets!.listedAgain;
    }
    expect(worlds).toBeGreaterThan(15);
    expect(forgotten).toBeGreaterThan(5);
    expect(listedAgain).toBeGreaterThan(5);
  }, 120_000);
});

describe('the checks catch planted bugs', () => {
  type Claims = {
    byUrl: Map<string, Map<string, number>>;
    unclaim(url: string, node: string): void;
    stamp(url: string, at: number): void;
  };
  type Store = {
    roomMade: Map<string, unknown>;
    forgetReplica(url: string, r: unknown, at: number): void;
  };
  const store = MemoryFleetStore.prototype as unknown as Store & Record<string, unknown>;
  const saved = {
    lapse: NodeClaim.prototype.lapse,
    dropUnlisted: ReplicaClaims.prototype.dropUnlisted,
    unclaimed: ReplicaClaims.prototype.unclaimed,
    drop: ReplicaClaims.prototype.drop,
    forgetReplica: store.forgetReplica,
  };
  afterEach(() => {
    NodeClaim.prototype.lapse = saved.lapse;
    ReplicaClaims.prototype.dropUnlisted = saved.dropUnlisted;
    ReplicaClaims.prototype.unclaimed = saved.unclaimed;
    ReplicaClaims.prototype.drop = saved.drop;
    store.forgetReplica = saved.forgetReplica;
  });

  it('a superseded configuration lapsing at once, while a worker may still use it', async () => {
    NodeClaim.prototype.lapse = function (this: NodeClaim, now: number) {
      return saved.lapse.call(this, now, 0);
    };
    const found = await firstBroken(1, 300);
    expect(found?.v.invariant).toBe(KEPT_INVARIANT);
    expect(found?.v.detail).toMatch(/superseded configuration .* lists it, used at/);
  }, 120_000);

  it("a retain that drops other nodes' claims on what its node no longer lists", async () => {
    ReplicaClaims.prototype.dropUnlisted = function (
      this: ReplicaClaims,
      _node: string,
      listed: ReadonlySet<string>,
      at: number,
      known: (url: string) => boolean,
    ) {
      const c = this as unknown as Claims;
      for (const [url, nodes] of [...c.byUrl])
        if (!listed.has(url))
          for (const n of [...nodes.keys()]) {
            c.unclaim(url, n);
            if (known(url)) c.stamp(url, at);
          }
    };
    const found = await firstBroken(1, 300);
    expect(found?.v.invariant).toBe(KEPT_INVARIANT);
  }, 120_000);

  it('a store that never forgets: the replica is still polled past its due time', async () => {
    ReplicaClaims.prototype.unclaimed = () => [];
    const found = await firstBroken(1, 300);
    expect(found?.v.invariant).toBe(FORGOTTEN_INVARIANT);
    expect(found?.v.detail).toMatch(/listed by no configuration, called at/);
  }, 120_000);

  it('a forget that leaves the room a make-room unload made on the replica', async () => {
    store.forgetReplica = function (this: Store, url: string, r: unknown, at: number) {
      const room = this.roomMade.get(url);
      saved.forgetReplica.call(this, url, r, at);
      if (room) this.roomMade.set(url, room);
    };
    const found = await firstBroken(1, 300);
    expect(found?.v.invariant).toBe(FORGOTTEN_INVARIANT);
    expect(found?.v.detail).toMatch(/keeps .*roomMade/);
  }, 120_000);

  it('a forget that leaves its claim records', async () => {
    ReplicaClaims.prototype.drop = () => undefined;
    const found = await firstBroken(1, 300);
    expect(found?.v.invariant).toBe(FORGOTTEN_INVARIANT);
    expect(found?.v.detail).toMatch(/keeps .*claims/);
  }, 120_000);
});

/**
 * A replica only node 0 lists (nodes 1 and 2 dropped it at the start, their old configuration
 * lapsed 60 s later); node 0 sends a long request there and goes down past node_ttl_ms and the
 * grace while it runs: its claim lapses, its lease stays open (renewed by the replica's word).
 */
const GUARD_WORLD: Schedule['world'] = {
  nodes: 3,
  replicas: 3,
  maxLoadedAdapters: 1,
  adapters: ['sql', 'chat', 'team', 'a'],
  loadMs: 200,
  decodeMsPerStep: 100,
  coldLoadsPerMinute: 1000,
  leaseMaxAgeMs: 4000,
  ttftSloMs: 0,
  queueTimeoutMs: 4000,
  upstreamTimeoutMs: 30_000,
  spanMs: 2000,
  nodeTtlMs: 500,
  configChanges: { retainEveryMs: 1000, staleMs: 0 },
};
const GUARD_ACTIONS: Action[] = [
  { at: 10, kind: 'config-change', node: 0, replicas: [0] },
  { at: 10, kind: 'config-change', node: 1, replicas: [1, 2] },
  { at: 10, kind: 'config-change', node: 2, replicas: [1, 2] },
  { at: 62_000, kind: 'request', node: 0, adapter: 0, tokens: 150, prompt: 100 },
  { at: 62_600, kind: 'node-down', node: 0, ms: 6000 },
  ...Array.from(
    { length: 6 },
    (_, i): Action => ({
      at: 69_000 + i * 300,
      kind: 'request',
      node: 0,
      adapter: 1 + (i % 3),
      tokens: 3,
      prompt: 100,
    }),
  ),
];

describe("the store's guard: nothing running on a replica it forgets", () => {
  type Idle = { idle(url: string, r: unknown): boolean };
  const store = MemoryFleetStore.prototype as unknown as Idle;
  const idle = store.idle;
  afterEach(() => {
    store.idle = idle;
  });

  it('keeps a replica whose only node is down while its request runs there', async () => {
    const r = await runSchedule({ seed: 7, world: GUARD_WORLD, actions: GUARD_ACTIONS });
    expect(r.violation).toBeUndefined();
    expect(r.forgets?.forgotten).toBe(0);
  }, 60_000);

  it('planted: a retain that ignores leases, in-flight counts, loads and unloads forgets it under its lease', async () => {
    store.idle = () => true;
    const r = await runSchedule({ seed: 7, world: GUARD_WORLD, actions: GUARD_ACTIONS });
    expect(r.violation?.invariant).toBe(LEASED_INVARIANT);
  }, 60_000);
});

describe('keysOf', () => {
  const URL = 'http://replica-0:8000';

  it('finds every record of a replica in a store, and none once it is forgotten', async () => {
    const s = new MemoryFleetStore();
    await s.upsertReplica({ url: URL, backend: 'vllm', priority: 0 }, 'n0', 0);
    await s.upsertReplica({ url: 'http://replica-1:8000', backend: 'vllm', priority: 0 }, 'n0', 0);
    const kept = keysOf({ store: s }, URL, 0);
    expect(kept).toEqual(
      expect.arrayContaining([expect.stringContaining('replicas<key'), expect.stringContaining('claims')]),
    );
    // The node stops listing it (its claim goes at once), then, past the grace, the store forgets it.
    expect(await s.retainReplicas(['http://replica-1:8000'], 1000, { at: 5000, node: 'n0' })).toEqual([]);
    expect(keysOf({ store: s }, URL, 5000)).not.toEqual([]);
    expect(await s.retainReplicas(['http://replica-1:8000'], 1000, { at: 7000, node: 'n0' })).toEqual([URL]);
    expect(keysOf({ store: s }, URL, 7000)).toEqual([]);
    expect(keysOf({ store: s }, 'http://replica-1:8000', 7000)).not.toEqual([]);
  });
});
