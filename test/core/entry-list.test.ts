/**
 * A replica's admitted work entries as a list through the entries (src/work/replica-state.ts
 * `EntryList`), which replaced a Map keyed by lease id: admission order kept, whatever order the
 * log phases give the leases back in, and nothing of a released entry left on the replica.
 */
import { seededRandom } from '../../src/random';
import { EntryList, type Entry, type ReplicaState } from '../../src/work/replica-state';
import { WorkModel } from '../../src/work/work-model';

const U = 'http://a:8000';

function entry(id: string): Entry {
  return {
    id,
    url: U,
    prompt: 1,
    kv: 1,
    maxTokens: 1,
    at: 0,
    end: 0,
    prefillEndAt: 0,
    priority: 0,
    older: undefined,
    younger: undefined,
  };
}

/** The ids from the oldest through the links, and from the youngest back (both ways agree). */
function both(l: EntryList): [string[], string[]] {
  const forward: string[] = [];
  for (let e = l.oldest; e !== undefined; e = e.younger) forward.push(e.id);
  const backward: string[] = [];
  for (let e = l.youngest; e !== undefined; e = e.older) backward.unshift(e.id);
  return [forward, backward];
}

describe('EntryList', () => {
  it('keeps admission order through deletes of the oldest, the youngest and one between, as a Map did', () => {
    const rand = seededRandom(11);
    const l = new EntryList();
    const model: Entry[] = [];
    for (let step = 0, next = 0; step < 400; step++) {
      if (model.length === 0 || rand() < 0.55) {
        const e = entry(`lease-${next++}`);
        l.add(e);
        model.push(e);
      } else {
        const [gone] = model.splice(Math.floor(rand() * model.length), 1);
        l.delete(gone!);
        // A released entry holds no neighbour (nothing of the list kept alive through it).
        expect([gone!.older, gone!.younger]).toEqual([undefined, undefined]);
      }
      const ids = model.map((e) => e.id);
      expect(both(l)).toEqual([ids, ids]);
      expect(l.size).toBe(model.length);
      expect([...l.values()].map((e) => e.id)).toEqual(ids);
    }
  });

  it('values() lets the entry it yields be deleted (as a Map iterator did)', () => {
    const l = new EntryList();
    const es = ['a', 'b', 'c', 'd'].map(entry);
    for (const e of es) l.add(e);
    const seen: string[] = [];
    for (const e of l.values()) {
      seen.push(e.id);
      if (e.id !== 'c') l.delete(e);
    }
    expect(seen).toEqual(['a', 'b', 'c', 'd']);
    expect(both(l)).toEqual([['c'], ['c']]);
  });
});

describe('WorkModel: the entries of the leases given back leave their replica', () => {
  it('released in any order, or purged by age, the replica ends with none and can be forgotten', () => {
    const rand = seededRandom(5);
    const w = new WorkModel({ prefillTokensPerS: 1000 });
    const replica = () => (w as unknown as { replicas: Map<string, ReplicaState> }).replicas.get(U)!;
    const open: string[] = [];
    for (let i = 0; i < 300; i++) {
      w.admit({ id: `lease-${i}`, url: U, promptTokens: 100, maxTokens: 10, at: i });
      open.push(`lease-${i}`);
      // A failed admission gives its lease back at once (the youngest); a log phase, any of them.
      const r = rand();
      if (r < 0.6) {
        const [id] = open.splice(r < 0.2 ? open.length - 1 : Math.floor(rand() * open.length), 1);
        w.release(id!, i, rand() < 0.5);
      }
      expect([...replica().entries.values()].map((e) => e.id)).toEqual(open);
      expect(w.view(U, i).inFlight).toBe(open.length);
    }
    // The oldest half by age (their log phase never came), then the rest given back.
    w.purge(300 + 150, 300);
    const young = open.filter((id) => Number(id.slice('lease-'.length)) >= 150);
    expect([...replica().entries.values()].map((e) => e.id)).toEqual(young);
    for (const id of young) w.release(id, 500, true);
    expect(w.view(U, 500)).toMatchObject({ inFlight: 0, kvReservedTokens: 0, queuedPrefillTokens: 0 });
    expect(w.forget(U)).toBe(true);
  });
});

describe('WorkModel: an id admitted again', () => {
  // Unreachable from the router (every admission is a fresh lease id), but a Map keyed by id
  // replaced the first entry, and the list kept both: one release left the other for good.
  it('replaces its first entry: one release leaves nothing on the replica', () => {
    const w = new WorkModel({ prefillTokensPerS: 1000 });
    w.admit({ id: 'x', url: U, promptTokens: 100, maxTokens: 10, at: 0 });
    w.admit({ id: 'x', url: U, promptTokens: 100, maxTokens: 10, at: 1 });
    w.release('x', 2, true);
    expect(w.view(U, 2)).toMatchObject({ inFlight: 0, kvReservedTokens: 0 });
    expect(w.forget(U)).toBe(true);
  });
});
