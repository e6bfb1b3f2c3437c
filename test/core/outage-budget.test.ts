/**
 * Unit test of OutageBudget (src/fleet/redis/outage-budget.ts, one module): the cold-load budget a
 * node grants while the shared store does not answer. The real-parts proof over a real
 * redis-server is test/core/shared-faults.test.ts (item 7); this one pins what those runs cannot
 * see: the wait a refusal gives (a cold-load 429's Retry-After; anything but a positive wait is
 * a grant to the caller), windows passing during an outage, and what is re-published, merged
 * and adopted. Written against the survivors of `npm run mutation` (docs/reliability/mutation-testing.md).
 */
import type { Clock } from '../../src/clock';
import { FailoverFleetStore } from '../../src/fleet/redis/failover-store';
import { OutageBudget } from '../../src/fleet/redis/outage-budget';
import { silentLogger } from '../../src/log';
import type { SharedStore } from '../../src/fleet/redis/shared-store';

const LIMIT = 6;
const W = 60_000;
const PROBE_MS = 50;

/** The shared side as OutageBudget reads it: nodes last seen, the epoch, the budget adds it sends. */
class FakeShared {
  liveNodes: number | null = 3;
  currentEpoch: string | null = 'e1';
  adds: [string, number, number][] = [];
  failAdds = 0;
  async addToBudget(key: string, count: number, windowMs: number): Promise<void> {
    if (this.failAdds > 0) {
      this.failAdds--;
      throw new Error('connection lost');
    }
    this.adds.push([key, count, windowMs]);
  }
}

function setup(pred: () => OutageBudget | null = () => null) {
  const t = { now: 0 };
  const clock: Clock = { now: () => t.now, after: () => () => undefined };
  const shared = new FakeShared();
  const budget = new OutageBudget(shared as unknown as SharedStore, clock, pred);
  /** spendAlone's answer at `at`: 0 granted, else the wait before a retry. */
  const spend = (at: number, key = 'fleet') => {
    t.now = at;
    return budget.spendAlone(key, LIMIT, W, PROBE_MS);
  };
  return { t, shared, budget, spend };
}

describe('OutageBudget: the share a node grants alone', () => {
  it('a process that never heard from the shared state refuses, with a positive wait (a probe) each time', () => {
    const { shared, spend } = setup();
    shared.liveNodes = null;
    for (let i = 0; i < 3; i++) expect(spend(i)).toBe(PROBE_MS);
  });

  it('more nodes than the budget: a share of none, refused with a positive wait', () => {
    const { shared, spend } = setup();
    shared.liveNodes = LIMIT + 1;
    expect(spend(0)).toBe(PROBE_MS);
  });

  it('grants floor(budget / nodes), then refuses until its oldest grant leaves the window, and says when', () => {
    const { spend } = setup();
    expect(spend(0)).toBe(0);
    expect(spend(1000)).toBe(0);
    // 6 over 3 nodes: 2 granted. The third waits for the grant at 0 to leave the window.
    expect(spend(2000)).toBe(W - 2000);
    expect(spend(30_000)).toBe(W - 30_000);
    // A spend exactly one window old is out of it (the shared budget's fixed window ends there too).
    expect(spend(W)).toBe(0);
    expect(spend(W + 500)).toBe(1000 + W - (W + 500));
  });

  it('a window that passed during the outage grants the share again', () => {
    const { spend } = setup();
    expect([spend(0), spend(1), spend(2)]).toEqual([0, 0, W - 2]);
    expect([spend(2 * W), spend(2 * W + 1), spend(2 * W + 2)]).toEqual([0, 0, W - 2]);
  });

  it('counts what its predecessor on the same state spent (oldest first for the wait)', () => {
    const old = setup();
    expect(old.spend(0)).toBe(0);
    const next = setup(() => old.budget);
    // Its share, 2, less the predecessor's one: one grant, then a wait for the grant at 0.
    expect(next.spend(10_000)).toBe(0);
    expect(next.spend(20_000)).toBe(W - 20_000);
  });

  // The simulation's seeds 1223, 102148, 102791: a `redis` record change to other state carries
  // the node's spends to the new runtime's store; a decision still under way on the old one, cut
  // off, then granted from a share it read as unspent (4 load calls in 60 s for a budget of 3).
  it('a store whose spends were carried to its successor on other state still counts them', () => {
    const old = setup();
    expect([old.spend(0), old.spend(1)]).toEqual([0, 0]);
    const next = setup();
    next.budget.carry(old.budget);
    // The node spent its share of 2: neither store grants it a third.
    expect(old.spend(2)).toBe(W - 2);
    expect(next.spend(3)).toBe(W - 3);
  });

  // A record change to other state reaches the nodes in turn: the first on the new state reads one
  // node there (itself) while the others still grant from the old state's window. Cut off, it
  // granted the whole budget alone (the simulation's seed 1023153 did so too, its fleet 67 ms old:
  // the node had seen only itself before, which this floor cannot help).
  it('a store on other state counts no fewer nodes than its predecessor saw', () => {
    const old = setup();
    const next = setup();
    next.shared.liveNodes = 1;
    next.budget.carry(old.budget);
    // 6 over the 3 nodes the node saw: 2 alone, not 6.
    expect([next.spend(0), next.spend(1)]).toEqual([0, 0]);
    expect(next.spend(2)).toBe(W - 2);
  });

  it('a store replaced on the same state counts what its successor spent since', () => {
    const old = setup();
    const next = setup(() => old.budget);
    old.budget.succeededBy(next.budget);
    expect([next.spend(0), next.spend(1)]).toEqual([0, 0]);
    // A decision still under way on the old store: the node's share is spent.
    expect(old.spend(2)).toBe(W - 2);
  });

  it('grants carried on from an old store count once, wherever they now are', () => {
    const old = setup();
    const next = setup();
    next.budget.carry(old.budget);
    expect(old.spend(0)).toBe(0);
    // The grant is carried on, as FailoverFleetStore.spendBudget does after each one.
    next.budget.carry(old.budget);
    expect(next.spend(1)).toBe(0);
    expect(old.spend(2)).toBe(W - 2);
  });
});

describe('OutageBudget: what goes back to the shared state', () => {
  it('merges what it granted alone; a merge that fails keeps it for the next one', async () => {
    const { shared, budget, spend } = setup();
    expect(spend(0)).toBe(0);
    expect(budget.unmerged).toBe(true);
    shared.failAdds = 1;
    await expect(budget.merge()).rejects.toThrow('connection lost');
    expect(budget.unmerged).toBe(true);
    await budget.merge();
    expect(shared.adds).toEqual([['fleet', 1, W]]);
    expect(budget.unmerged).toBe(false);
  });

  it('re-publishes the spends of this window the state does not count (emptied: a new epoch), once, and no older ones', async () => {
    const { t, shared, budget } = setup();
    t.now = 0;
    budget.spentShared('old', W);
    t.now = 30_000;
    budget.spentShared('fleet', W);
    budget.spentShared('fleet', W);
    // Nothing missing under the same epoch: nothing sent.
    await budget.republish();
    expect(shared.adds).toEqual([]);
    shared.currentEpoch = 'e2';
    t.now = W; // the spend of 'old' is exactly one window old: out
    await budget.republish();
    expect(shared.adds).toEqual([['fleet', 2, W]]);
    await budget.republish();
    expect(shared.adds).toEqual([['fleet', 2, W]]);
  });

  it('a spend granted alone and merged counts under the epoch that took it: re-published when that state is emptied, not before', async () => {
    const { t, shared, budget, spend } = setup();
    t.now = 0;
    budget.spentShared('fleet', W); // counted under e1
    expect(spend(1000)).toBe(0); // granted alone
    // The outage ends on an emptied state (e2): the merge adds the grant made alone there.
    shared.currentEpoch = 'e2';
    await budget.merge();
    expect(shared.adds).toEqual([['fleet', 1, W]]);
    // e2 lacks only the shared spend made under e1.
    await budget.republish();
    expect(shared.adds).toEqual([
      ['fleet', 1, W],
      ['fleet', 1, W],
    ]);
    // Emptied again: both are missing there.
    shared.currentEpoch = 'e3';
    await budget.republish();
    expect(shared.adds.at(-1)).toEqual(['fleet', 2, W]);
  });

  it('carries the spends of this window from a store on other state, no older ones', async () => {
    const a = setup();
    a.t.now = 0;
    a.budget.spentShared('old', W);
    a.t.now = 30_000;
    a.budget.spentShared('fleet', W);
    const b = setup();
    b.t.now = W;
    b.budget.carry(a.budget);
    await b.budget.republish();
    expect(b.shared.adds).toEqual([['fleet', 1, W]]);
  });

  it('adopting its predecessor on the same state takes what it granted alone, spent, and the fleet it saw', async () => {
    const old = setup();
    expect(old.spend(0)).toBe(0);
    const next = setup();
    // The new store's link never answered: it knows the fleet only from its predecessor.
    next.shared.liveNodes = null;
    next.budget.adopt(old.budget);
    expect(next.budget.unmerged).toBe(true);
    expect(old.budget.unmerged).toBe(false);
    // Share 2 less the predecessor's grant: one more, then a wait.
    expect(next.spend(1000)).toBe(0);
    expect(next.spend(2000)).toBe(W - 2000);
    await next.budget.merge();
    expect(next.shared.adds).toEqual([['fleet', 2, W]]);
  });

  it('remembers the spends of at most 1024 budget keys (the least recently spent go first)', async () => {
    const { t, shared, budget } = setup();
    t.now = 0;
    for (let i = 0; i <= 1024; i++) budget.spentShared(`consumer:${i}`, W);
    shared.currentEpoch = 'e2';
    await budget.republish();
    expect(shared.adds.length).toBe(1024);
    expect(shared.adds.map(([k]) => k)).not.toContain('consumer:0');
  });
});

describe('OutageBudget.republish run twice at once (a record change carrying spends while a grant pushes them on)', () => {
  it('adds each spend to the new state once', async () => {
    const { shared, budget } = setup();
    for (let i = 0; i < 5; i++) budget.spentShared('fleet', W);
    shared.currentEpoch = 'e2'; // the new state: none of the five is counted there yet
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const add = shared.addToBudget.bind(shared);
    shared.addToBudget = async (key, count, windowMs) => {
      await gate;
      return add(key, count, windowMs);
    };
    const both = Promise.all([budget.republish(), budget.republish()]);
    release();
    await both;
    expect(shared.adds).toEqual([['fleet', 5, W]]);
  });

  it('a failed add leaves the spends to the next republish', async () => {
    const { shared, budget } = setup();
    budget.spentShared('fleet', W);
    shared.currentEpoch = 'e2';
    shared.failAdds = 1;
    await expect(budget.republish()).rejects.toThrow('connection lost');
    await budget.republish();
    expect(shared.adds).toEqual([['fleet', 1, W]]);
  });
});

describe("FailoverFleetStore.carrySpends: the new state counts the node's spends at once", () => {
  // The simulation's seed 102791: a record change to other state, then a partition before the
  // new state took the registration; the spends waited on it and never came, and the new
  // store, cut off but knowing the fleet's size, granted its share afresh.
  it('a new store cut off before its registration answered grants only what the node left', async () => {
    const clock: Clock = { now: () => 1000, after: () => () => undefined };
    const cutOff = () => Promise.reject(new Error('connection lost'));
    const old = new FailoverFleetStore(
      {
        takeBudget: async () => ({ waitMs: 0, window: null }),
        liveNodes: 3,
        currentEpoch: 'e1',
      } as unknown as SharedStore,
      silentLogger,
      { probeMs: PROBE_MS, logEveryMs: W },
      clock,
    );
    for (let i = 0; i < 2; i++) expect(await old.spendBudget('fleet', LIMIT, W, 1000)).toBe(0);
    expect(old.mode()).toBe('redis');
    // The new state answered once (its heartbeat: 3 nodes), then is cut off.
    const next = new FailoverFleetStore(
      { takeBudget: cutOff, liveNodes: 3, currentEpoch: 'e2' } as unknown as SharedStore,
      silentLogger,
      { probeMs: PROBE_MS, logEveryMs: W },
      clock,
    );
    await next.carrySpends(old, cutOff());
    // Share 2 of 6 over 3 nodes, both spent before the change: nothing more alone.
    expect(await next.spendBudget('fleet', LIMIT, W, 1000)).toBeGreaterThan(0);
    expect(next.mode()).toBe('local');
  });
});

describe('FailoverFleetStore.refundBudget: a unit goes back only where it was spent', () => {
  /** A shared side whose budget grants in one window ('w1' opened at 5) and takes refunds back. */
  function failover() {
    const clock: Clock = { now: () => 1000, after: () => () => undefined };
    const shared = {
      liveNodes: 3,
      currentEpoch: 'e1' as string | null,
      down: false,
      refunds: [] as [string, number, number][],
      async takeBudget(key: string) {
        if (this.down) throw new Error('connection lost');
        return { waitMs: 0, window: { key, opened: 5 } };
      },
      async refundBudget(w: { key: string; opened: number }, count: number) {
        this.refunds.push([w.key, w.opened, count]);
        return count;
      },
    };
    const store = new FailoverFleetStore(
      shared as unknown as SharedStore,
      silentLogger,
      { probeMs: PROBE_MS, logEveryMs: W },
      clock,
    );
    return { shared, store };
  }

  it('to the shared window under the epoch it was counted in, while the shared store answers', async () => {
    const { shared, store } = failover();
    const taken = await store.takeBudget('fleet', LIMIT, W, 1000);
    expect(taken.window).toEqual({ key: 'fleet', opened: 5, epoch: 'e1' });
    expect(await store.refundBudget(taken.window!, 1, 1000)).toBe(1);
    expect(shared.refunds).toEqual([['fleet', 5, 1]]);
  });

  it('not to a state emptied since (another epoch), nor while degraded', async () => {
    const { shared, store } = failover();
    const taken = await store.takeBudget('fleet', LIMIT, W, 1000);
    shared.currentEpoch = 'e2';
    expect(await store.refundBudget(taken.window!, 1, 1000)).toBe(0);
    shared.currentEpoch = 'e1';
    shared.down = true;
    // Granted alone from the node's share: no window a refund can reach.
    expect(await store.takeBudget('fleet', LIMIT, W, 1000)).toEqual({ waitMs: 0, window: null });
    expect(store.mode()).toBe('local');
    expect(await store.refundBudget(taken.window!, 1, 1000)).toBe(0);
    expect(shared.refunds).toEqual([]);
    await store.close();
  });
});
