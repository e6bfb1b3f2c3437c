/**
 * A quick, empty Redis restart (no persistence) that no node saw fail a call: each node learns
 * of it from its heartbeat, at its own moment. The first to learn registers the replicas again
 * and re-takes its own leases; until the others' heartbeats come, their leases count nowhere,
 * and an unload decided meanwhile could run under their requests.
 */
import { FailoverFleetStore } from '../../src/fleet/redis/failover-store';
import { RedisFleetStore } from '../../src/fleet/redis/redis-store';
import { silentLogger } from '../../src/log';
import { RedisServer } from '../../harness/redis/server';
import { waitFor } from '../../harness/wait';

const U = 'http://10.0.0.1:8000';
/** Heartbeats every second: node_ttl_ms / 4. */
const NODE_TTL_MS = 4000;
const P = 'er:';

let redis: RedisServer;
beforeAll(async () => {
  redis = await RedisServer.start();
});
afterAll(async () => {
  await redis.close();
});

const snapshot = (at: number) => ({
  at,
  ok: true,
  load: { running: 2, waiting: 0, kvUsage: 0.1, activeAdapters: [], malformedLines: 0 },
  registry: [
    { name: 'a', path: '/adapters/a' },
    { name: 'b', path: '/adapters/b' },
  ],
  managed: () => true,
});

function node(id: string) {
  const shared = new RedisFleetStore(redis.config(P, { node_ttl_ms: NODE_TTL_MS, timeout: 2000 }), id);
  return { id, shared, s: new FailoverFleetStore(shared, silentLogger) };
}

const busy = async (adapter: string) =>
  Number((await redis.command(['HGET', `${P}busy:${U}`, adapter])) ?? 0);

it("after an empty restart, the first node to re-register unloads nothing under another node's lease it cannot see yet", async () => {
  const nodes = [node('A')];
  // Half a heartbeat apart: one node learns of the restart well before the other.
  await new Promise((r) => setTimeout(r, NODE_TTL_MS / 8));
  nodes.push(node('B'));
  try {
    for (const n of nodes) await n.s.upsertReplica({ url: U, backend: 'vllm', priority: 0 });
    await nodes[0]!.s.applySnapshot(U, snapshot(Date.now()));
    // Each node has a request running: A on adapter a, B on adapter b.
    expect(await nodes[0]!.s.acquire({ id: 'LA', url: U, adapter: 'a', at: Date.now() })).toBe('loaded');
    expect(await nodes[1]!.s.acquire({ id: 'LB', url: U, adapter: 'b', at: Date.now() })).toBe('loaded');
    const before = nodes[0]!.shared.currentEpoch;
    expect(before).not.toBeNull();

    await redis.restart(false);
    // The first heartbeat after it registers that node's replicas again (a new epoch) and its lease.
    const relearned = () => nodes.find((n) => n.shared.currentEpoch !== before);
    await waitFor(() => relearned() !== undefined, 5000, 'a node re-registering');
    const first = relearned()!;
    const other = nodes.find((n) => n !== first)!;
    const [mine, theirs] = first.id === 'A' ? ['a', 'b'] : ['b', 'a'];
    await waitFor(async () => (await busy(mine)) === 1, 2000, `${first.id}'s lease counted again`);
    // The other node's heartbeat has not come yet: its lease counts nowhere (the scenario).
    expect(await busy(theirs)).toBe(0);
    expect(other.shared.currentEpoch).toBe(before);

    // The first node's next poll adopts both adapters as loaded; the other's is idle as far as Redis knows.
    await first.s.applySnapshot(U, snapshot(Date.now()));
    expect(await first.s.beginUnload(U, theirs, Date.now(), 60_000)).toBeNull();

    // Once the other node's heartbeat has come, its lease counts again, exactly once.
    await waitFor(
      async () => (await busy(theirs)) === 1,
      2 * NODE_TTL_MS,
      `${other.id}'s lease counted again`,
    );
    const [v] = await first.s.views([U], { name: theirs });
    expect(v).toMatchObject({ inFlight: 2, adapter: { state: 'loaded', inFlight: 1 } });
    expect(await first.s.beginUnload(U, theirs, Date.now(), 60_000)).toBeNull();

    // Both requests end: once every node has had its heartbeats, unloads are decided as before.
    await nodes[0]!.s.release('LA', Date.now(), 200);
    await nodes[1]!.s.release('LB', Date.now(), 200);
    let fence: number | null = null;
    await waitFor(
      async () => (fence = await first.s.beginUnload(U, theirs, Date.now(), 60_000)) !== null,
      2 * NODE_TTL_MS,
      'an idle adapter unloadable again',
    );
    expect(fence).toBeGreaterThan(0);
  } finally {
    for (const n of nodes) await n.s.close();
  }
}, 30_000);

it('a runtime replaced on the same state that registers first after a FLUSHALL begins it with the grace: no node unloads under a lease not yet taken again', async () => {
  await redis.command(['FLUSHALL']); // the first case's unload of b is left over
  const old = node('C');
  const peer = node('D');
  const other = node('E');
  let successor: ReturnType<typeof node> | null = null;
  try {
    for (const n of [old, peer, other]) await n.s.upsertReplica({ url: U, backend: 'vllm', priority: 0 });
    await old.s.applySnapshot(U, snapshot(Date.now()));
    // The old runtime's request on adapter b and node E's on a: leases the FLUSHALL loses.
    expect(await old.s.acquire({ id: 'LC', url: U, adapter: 'b', at: Date.now() })).toBe('loaded');
    expect(await other.s.acquire({ id: 'LE', url: U, adapter: 'a', at: Date.now() })).toBe('loaded');
    const before = peer.shared.currentEpoch;
    expect(before).not.toBeNull();

    await redis.command(['FLUSHALL']);
    // A `redis` record change on the same state (only `timeout` changed): node C's new runtime, one
    // node id, a new connection, registers the replicas first (src/runtime.ts, `passPolling`).
    successor = node('C');
    await successor.s.succeed(old.s);
    await successor.s.upsertReplica({ url: U, backend: 'vllm', priority: 0 });
    await successor.s.applySnapshot(U, snapshot(Date.now()));
    // Its registration began the new state, so it took node C's lease back at once (its old
    // runtime's too). Neither the peer nor node E has heard of it yet (their heartbeats come each
    // second): lease LE counts nowhere, and `a` reads idle.
    expect(peer.shared.currentEpoch).toBe(before);
    expect(other.shared.currentEpoch).toBe(before);
    expect(await busy('b')).toBe(1);
    expect(await busy('a')).toBe(0);
    // The successor's node knew the old state: its registration asked the grace, so no unload.
    expect(await peer.s.beginUnload(U, 'a', Date.now(), 60_000)).toBeNull();
  } finally {
    for (const n of [old, peer, other, ...(successor ? [successor] : [])]) await n.s.close();
  }
}, 30_000);

it('a lease taken after a FLUSHALL, before any node registered the replica again, counts once it is taken again: no unload under it', async () => {
  const a = node('E');
  const b = node('F');
  try {
    for (const n of [a, b]) await n.s.upsertReplica({ url: U, backend: 'vllm', priority: 0 });
    await a.s.applySnapshot(U, snapshot(Date.now()));
    const before = a.shared.currentEpoch;
    expect(before).not.toBeNull();

    await redis.command(['FLUSHALL']);
    // Node E admits a request on `a` before any heartbeat told it (LeaseHandle.take: a plain
    // acquire, as for a fresh lease after a slow load). Redis knows no replica: the lease is
    // stored counted nowhere.
    await a.s.acquire({ id: 'LE', url: U, adapter: 'a', at: Date.now() });
    // E's heartbeat finds the state emptied: it registers the replica and takes its leases again.
    await waitFor(() => a.shared.currentEpoch !== before, 5000, 'E re-registering');
    await a.s.applySnapshot(U, snapshot(Date.now()));
    // Past the grace and F's own hold-off after the emptied state (F's heartbeat has told it).
    await new Promise((r) => setTimeout(r, NODE_TTL_MS + 500));
    expect(b.shared.currentEpoch).toBe(a.shared.currentEpoch);
    // E's request still runs on `a`: F's trim must not be granted its unload.
    expect(await b.s.beginUnload(U, 'a', Date.now(), 60_000, '\u0000trim', 0)).toBeNull();
    expect(await busy('a')).toBe(1);
    // Once it ends, `a` is idle and the same unload goes.
    expect(await a.s.release('LE', Date.now(), 200)).toMatchObject({ adapterIdle: true });
    expect(await busy('a')).toBe(0);
    expect(await b.s.beginUnload(U, 'a', Date.now(), 60_000, '\u0000trim', 0)).not.toBeNull();
  } finally {
    for (const n of [a, b]) await n.s.close();
  }
}, 30_000);
