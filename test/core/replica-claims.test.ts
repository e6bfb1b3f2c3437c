/**
 * The in-process twin of the `retain` script (src/fleet/replica-claims.ts, through
 * MemoryFleetStore.retainReplicas as the simulation's modelled Redis calls it: its node, its time,
 * node_ttl_ms and the nodes' heartbeats passed in). Its bounds to the millisecond, which
 * forget-replicas (wall clock on both stores) cannot pin: a claim lapses `node_ttl_ms` after its
 * node's last sign of life, a replica goes only once past the grace from its last claim, and one
 * call looks at the oldest due first, a batch at most. Never forgotten: a replica a live node's
 * configuration lists, or whose node is back before any sweep dropped its claims.
 */
import { MemoryFleetStore } from '../../src/fleet/memory-store';
import { ReplicaClaims } from '../../src/fleet/replica-claims';
import type { ReplicaSpec } from '../../src/fleet/types';

const U1 = 'http://10.0.0.1:8000';
const U2 = 'http://10.0.0.2:8000';
const spec = (url: string): ReplicaSpec => ({ url, backend: 'vllm', priority: 0 });
const t0 = 1_000_000;
/** Far above any step here: "within the grace", "within node_ttl_ms". */
const LONG = 600_000;

/** A store and its nodes' heartbeats, as the modelled Redis keeps them (the scripts' `nodes` zset). */
function fleet() {
  const m = new MemoryFleetStore();
  const beats = new Map<string, number>();
  return {
    m,
    beat: (node: string, at: number) => void beats.set(node, at),
    register: (url: string, node: string, at: number) => m.upsertReplica(spec(url), node, at),
    /** Node `node`'s poll round at `at`: it routes to exactly `urls`. */
    retain: (node: string, urls: readonly string[], at: number, graceMs: number, nodeTtlMs = LONG) =>
      m.retainReplicas(urls, graceMs, { node, at, nodeTtlMs, heartbeat: (n) => beats.get(n) }),
    specs: async () => (await m.replicaSpecs()).map((s) => s.url).sort(),
  };
}

describe('a replica a live node still claims is never forgotten', () => {
  it('two nodes claim it: the one that claimed first still holds it when the other stops listing it', async () => {
    const f = fleet();
    await f.register(U1, 'A', t0);
    await f.register(U1, 'B', t0 + 1); // a second node's claim adds to A's, never replaces it
    expect(await f.retain('B', [], t0 + 2, 100)).toEqual([]);
    // Past the grace from B's drop, A alive (its claim within node_ttl_ms).
    expect(await f.retain('B', [], t0 + 500, 100)).toEqual([]);
    expect(await f.specs()).toEqual([U1]);
  });

  it('a node silent past node_ttl_ms and back (heartbeating) before any sweep: its claim holds again', async () => {
    // A and B claim U1; B pauses (no heartbeat after t0), A stops listing U1 at t1.
    const f = fleet();
    const G = 5000;
    const TTL = 1000;
    const t1 = t0 + 100;
    await f.register(U1, 'A', t0);
    await f.register(U1, 'B', t0);
    f.beat('B', t0);
    await f.retain('A', [], t1, G, TTL);
    // At t1 + G exactly U1 is not due yet (its last claim not older than the grace): not looked
    // at, so B's lapsed claim is not dropped there (the script reads only what is due).
    expect(await f.retain('A', [], t1 + G, G, TTL)).toEqual([]);
    // B is back just after (heartbeating: no sweep ran), still routing to U1: its claim is live.
    f.beat('B', t1 + G + 1);
    expect(await f.retain('A', [], t1 + G + 2, G, TTL)).toEqual([]);
    expect(await f.specs()).toEqual([U1]);
  });
});

describe('a replica a node stopped listing is forgotten past the grace', () => {
  it('one round drops one of its replicas, a later round the other: both go', async () => {
    const f = fleet();
    await f.register(U1, 'A', t0);
    await f.register(U2, 'A', t0);
    await f.retain('A', [U2], t0 + 10, 100); // U1 dropped; A still claims U2
    await f.retain('A', [], t0 + 20, 100); // U2 dropped too
    expect(await f.retain('A', [], t0 + 200, 100)).toEqual([U1, U2]);
  });
});

describe('the bounds, to the millisecond (as the script: `seen > t - nodeTtl`, `claimed < t - grace`)', () => {
  it('a claim lapses exactly node_ttl_ms after its node last claimed: live one ms before', async () => {
    const f = fleet();
    await f.register(U1, 'B', t0); // B claims, then nothing from B (no heartbeat)
    await f.register(U2, 'A', t0);
    const roundA = (at: number) => f.retain('A', [U2], at, 500, 1000);
    expect([await roundA(t0 + 999), await roundA(t0 + 1000)]).toEqual([[], [U1]]);
  });

  it("a dead node's last heartbeat starts the grace: kept at exactly the grace from it, forgotten one ms after", async () => {
    const f = fleet();
    await f.register(U1, 'B', t0);
    f.beat('B', t0 + 500); // after its claim; dead by t0 + 1500 (node_ttl_ms 1000)
    await f.register(U2, 'A', t0);
    const roundA = (at: number) => f.retain('A', [U2], at, 2000, 1000);
    expect([await roundA(t0 + 2500), await roundA(t0 + 2501)]).toEqual([[], [U1]]);
  });
});

describe('one call looks at a batch (100) of the replicas due, the oldest first, as the script', () => {
  it('live replicas due too (a grace under the heartbeat interval): the one to forget, older, is reached in the next call', async () => {
    const f = fleet();
    // 105 replicas B claims (registered first: first in any insertion order), then only heartbeats for.
    const many = Array.from({ length: 105 }, (_, i) => `http://10.9.0.${i + 1}:8000`);
    for (const u of many) await f.register(u, 'B', t0);
    await f.register(U1, 'A', t0 + 10);
    expect(await f.retain('A', [], t0 + 20, 100)).toEqual([]); // A no longer routes to U1: stamped t0 + 20
    f.beat('B', t0 + 30); // B alive (node_ttl_ms LONG), its replicas restamped to it: still due
    // First call: the 100 oldest (B's, t0), live, restamped. Second: the 5 left, then U1 (t0 + 20).
    expect([await f.retain('A', [], t0 + 1000, 100), await f.retain('A', [], t0 + 1001, 100)]).toEqual([
      [],
      [U1],
    ]);
    expect(await f.specs()).toEqual([...many].sort());
  });

  it('due since the same instant: looked at in url order (Redis orders equal scores by member)', async () => {
    const f = fleet();
    const url = (i: number) => `http://r${String(i).padStart(3, '0')}:8000`;
    const urls = Array.from({ length: 101 }, (_, i) => url(i));
    // Registered shuffled (37 steps round 101): url order is neither the insertion order nor its reverse.
    for (let i = 0; i < 101; i++) await f.register(url((i * 37) % 101), 'A', t0);
    await f.retain('A', [], t0 + 1, 10); // all dropped at one instant
    expect(await f.retain('A', [], t0 + 100, 10)).toEqual(urls.slice(0, 100));
    expect(await f.retain('A', [], t0 + 101, 10)).toEqual(urls.slice(100));
  });
});

describe('ReplicaClaims alone: only registered urls are answered', () => {
  it('a url claimed, then no longer registered: never answered, its claim records go (never claimed, if registered again)', () => {
    const c = new ReplicaClaims();
    c.claim(U1, 'A', t0);
    expect(c.unclaimed(t0 + 10_000, 100, 1000, 100, () => false)).toEqual([]);
    // Registered again by a node of an older version (no claim): kept, as one never claimed, even
    // once A is found dead (no claim of A's left on it to stamp it claimed).
    const registered = (url: string) => url === U1;
    c.dropNode('A', t0 + 20_000, registered, t0);
    expect(c.unclaimed(t0 + 40_000, 100, 1000, 100, registered)).toEqual([]);
  });
});
