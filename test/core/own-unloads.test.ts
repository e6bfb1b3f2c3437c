/**
 * OwnUnloads (src/adapters/own-unloads.ts): what a node's decisions read of its own unloads under
 * way, whatever the store says. The decision-level case is test/core/own-unload.test.ts.
 */
import { OwnUnloads } from '../../src/adapters/own-unloads';
import { view } from './helpers';

const R = 'http://r1:8000';
const S = 'http://r2:8000';
const loaded = { state: 'loaded' as const, lastUsed: 5, inFlight: 0 };

describe('OwnUnloads', () => {
  it('leaves views and states alone while nothing is being unloaded', () => {
    const own = new OwnUnloads();
    const views = [view(R, { adapter: loaded })];
    const before = views[0]!.adapter;
    own.overlay(views, 'a');
    expect(views[0]!.adapter).toBe(before);
    expect(own.stateOf(R, 'a', 'loaded')).toBe('loaded');
    expect(own.stateOf(R, 'a', undefined)).toBeUndefined();
  });

  it('shows an unload under way as `unloading` on its replica only, on a copy of the store’s entry', () => {
    const own = new OwnUnloads();
    own.begin(R, 'a');
    const onR = { ...loaded };
    const views = [view(R, { adapter: onR }), view(S, { adapter: { ...loaded } })];
    own.overlay(views, 'a');
    expect(views.map((v) => v.adapter?.state)).toEqual(['unloading', 'loaded']);
    expect(onR.state).toBe('loaded');
    // Another adapter on that replica, and a placement (no residency), stay as they are.
    const b = [view(R, { adapter: { ...loaded } })];
    own.overlay(b, 'b');
    expect(b[0]!.adapter?.state).toBe('loaded');
    const placed = [view(R, { adapter: { state: 'loading', lastUsed: 0, inFlight: 0, placed: true } })];
    own.overlay(placed, 'a');
    expect(placed[0]!.adapter?.state).toBe('loading');
    // Under the lease: `unloading`, even with no entry in the store (emptied, not polled yet).
    expect(own.stateOf(R, 'a', 'loaded')).toBe('unloading');
    expect(own.stateOf(R, 'a', undefined)).toBe('unloading');
    expect(own.stateOf(S, 'a', 'loaded')).toBe('loaded');
    expect(own.stateOf(R, null, 'loaded')).toBe('loaded');
    own.end(R, 'a');
    expect(own.stateOf(R, 'a', 'loaded')).toBe('loaded');
  });

  it('counts overlapping calls: the adapter reads `unloading` until the last ends', () => {
    const own = new OwnUnloads();
    own.begin(R, 'a');
    own.begin(R, 'a');
    own.end(R, 'a');
    expect(own.unloading(R, 'a')).toBe(true);
    own.end(R, 'a');
    expect(own.unloading(R, 'a')).toBe(false);
  });

  it('after an unload done whose lock the store had lost, an entry the store has reads `unloading` until a poll begun after its end', () => {
    const own = new OwnUnloads();
    own.begin(R, 'a');
    own.ended(R, 'a', 100, false);
    own.end(R, 'a');
    expect(own.stateOf(R, 'a', 'loaded')).toBe('unloading');
    // No entry: gone already, a load may go ahead.
    expect(own.stateOf(R, 'a', undefined)).toBeUndefined();
    // A poll begun before the end may have listed it still; one of another replica says nothing.
    own.polled(R, 99);
    own.polled(S, 200);
    expect(own.stateOf(R, 'a', 'loaded')).toBe('unloading');
    own.polled(R, 100);
    expect(own.stateOf(R, 'a', 'loaded')).toBe('loaded');
  });

  it('after the shared state is back from an outage, an unload done and recorded reads `unloading` until a poll begun after', () => {
    const own = new OwnUnloads();
    own.begin(R, 'a');
    own.ended(R, 'a', 100, true);
    own.end(R, 'a');
    // Recorded: the store says what the node knows.
    expect(own.stateOf(R, 'a', 'loaded')).toBe('loaded');
    // Back at 900, maybe from a snapshot older than the end (dst seed 1038807).
    own.sharedAgain(900);
    expect(own.stateOf(R, 'a', 'loaded')).toBe('unloading');
    expect(own.stateOf(S, 'a', 'loaded')).toBe('loaded');
    const views = [view(R, { adapter: { ...loaded } })];
    own.overlay(views, 'a');
    expect(views[0]!.adapter?.state).toBe('unloading');
    // A poll begun during the outage went to the node's own state, not to the one back.
    own.polled(R, 500);
    expect(own.stateOf(R, 'a', 'loaded')).toBe('unloading');
    own.polled(R, 900);
    expect(own.stateOf(R, 'a', 'loaded')).toBe('loaded');
    // Kept: the next outage may roll it back again.
    own.sharedAgain(2000);
    expect(own.stateOf(R, 'a', 'loaded')).toBe('unloading');
  });

  it('a runtime that replaced another (a `redis` record change) reads its unloads, until it is retired and reads nothing', () => {
    const old = new OwnUnloads();
    const next = new OwnUnloads();
    old.begin(R, 'a');
    next.inherit(old);
    expect(next.stateOf(R, 'a', 'loaded')).toBe('unloading');
    old.ended(R, 'a', 100, false);
    old.end(R, 'a');
    old.retire();
    expect(next.stateOf(R, 'a', 'loaded')).toBe('unloading');
    // Polling moved to the newer runtime: its poll tells the older one.
    next.polled(R, 100);
    expect(old.stateOf(R, 'a', 'loaded')).toBe('loaded');
    expect(next.stateOf(R, 'a', 'loaded')).toBe('loaded');
    const views = [view(R, { adapter: { ...loaded } })];
    next.overlay(views, 'a');
    expect(views[0]!.adapter?.state).toBe('loaded');
  });

  it('a poll by a runtime that replaced another on other state leaves the older one reading its unload `unloading`', () => {
    // dst seed 741908 under another timer order: node 1 unloaded `med` on db 0 (its end lost to a
    // FLUSHALL), moved to db 1, and its db 1 poll let a request still deciding on db 0 read the
    // stale `loaded` there and be proxied to a replica without `med`.
    const old = new OwnUnloads();
    const next = new OwnUnloads();
    old.begin(R, 'a');
    old.ended(R, 'a', 100, false);
    old.end(R, 'a');
    next.inherit(old, false);
    expect(next.stateOf(R, 'a', 'loaded')).toBe('unloading');
    next.polled(R, 200);
    // The new store was read afresh; the old one was not, and a decision there still reads it.
    expect(next.stateOf(R, 'a', 'loaded')).toBe('loaded');
    expect(old.stateOf(R, 'a', 'loaded')).toBe('unloading');
    // Its own store polled again (a round under way at the change): read there too.
    old.polled(R, 150);
    expect(old.stateOf(R, 'a', 'loaded')).toBe('loaded');
    // Retired with nothing the newer store lacks: dropped, the newer one idle again.
    old.retire();
    next.polled(R, 300);
    expect(next.unloading(R, 'a')).toBe(false);
  });

  it('a runtime on other state reads an older one’s unload ended after its own last poll', () => {
    const old = new OwnUnloads();
    const next = new OwnUnloads();
    next.inherit(old, false);
    next.polled(R, 50);
    old.begin(R, 'a');
    old.ended(R, 'a', 100, false);
    old.end(R, 'a');
    old.retire();
    // Its poll began before the end: kept through the retirement.
    next.polled(R, 60);
    expect(next.stateOf(R, 'a', 'loaded')).toBe('unloading');
    next.polled(R, 100);
    expect(next.stateOf(R, 'a', 'loaded')).toBe('loaded');
  });

  it('keeps each adapter’s unrecorded end on a replica: two unloads there read `unloading` each', () => {
    const own = new OwnUnloads();
    own.ended(R, 'a', 100, false);
    own.ended(R, 'b', 110, false);
    expect(own.stateOf(R, 'a', 'loaded')).toBe('unloading');
    expect(own.stateOf(R, 'b', 'loaded')).toBe('unloading');
    own.polled(R, 105);
    expect([own.stateOf(R, 'a', 'loaded'), own.stateOf(R, 'b', 'loaded')]).toEqual(['loaded', 'unloading']);
  });

  it('a runtime that replaced an idle one reads the store’s states', () => {
    const old = new OwnUnloads();
    const next = new OwnUnloads();
    next.inherit(old);
    expect(next.stateOf(R, 'a', 'loaded')).toBe('loaded');
    expect(next.unloading(R, 'a')).toBe(false);
  });

  it('a retired runtime on the same state is kept through a poll of another replica while its unload there is unpolled', () => {
    const old = new OwnUnloads();
    const next = new OwnUnloads();
    next.inherit(old);
    old.ended(R, 'a', 100, false);
    old.retire();
    next.polled(S, 200);
    expect(next.stateOf(R, 'a', 'loaded')).toBe('unloading');
  });

  it('a retired runtime on other state is kept while its unload is on a replica the newer one never polled', () => {
    const old = new OwnUnloads();
    const next = new OwnUnloads();
    next.inherit(old, false);
    old.ended(R, 'a', 100, false);
    old.retire();
    next.polled(S, 200);
    expect(next.stateOf(R, 'a', 'loaded')).toBe('unloading');
  });

  it('two record changes to other state: the newest reads the oldest one’s unload through the one between', () => {
    const first = new OwnUnloads();
    const second = new OwnUnloads();
    const third = new OwnUnloads();
    second.inherit(first, false);
    first.ended(R, 'a', 100, false);
    first.retire();
    third.inherit(second, false);
    second.retire();
    third.polled(S, 200);
    expect(third.stateOf(R, 'a', 'loaded')).toBe('unloading');
  });

  it('a runtime on other state reads an older one’s unload ended in the millisecond its own poll began as polled', () => {
    // As a poll clears this runtime's own: an end at or before the poll's start is read there.
    const old = new OwnUnloads();
    const next = new OwnUnloads();
    next.inherit(old, false);
    old.ended(R, 'a', 100, false);
    next.polled(R, 100);
    expect(next.stateOf(R, 'a', 'loaded')).toBe('loaded');
    expect(old.stateOf(R, 'a', 'loaded')).toBe('unloading');
  });

  it('asks for a poll of a replica where an adapter reads `unloading` only for an unpolled end, once per end', () => {
    const own = new OwnUnloads();
    const asked: string[] = [];
    own.onUnpolled = (url) => asked.push(url);
    // A call under way is no end to poll after: nothing asked.
    own.begin(R, 'a');
    expect(own.stateOf(R, 'a', 'loaded')).toBe('unloading');
    expect(asked).toEqual([]);
    // Its end refused (the store had lost the lock); no entry left in the store: nothing asked.
    own.ended(R, 'a', 100, false);
    own.end(R, 'a');
    expect(own.stateOf(R, 'a', undefined)).toBeUndefined();
    expect(asked).toEqual([]);
    // The store still reads it: one poll asked, however often it is read so (views, a lease, a wait).
    expect(own.stateOf(R, 'a', 'loaded')).toBe('unloading');
    own.overlay([view(R, { adapter: { ...loaded } })], 'a');
    expect(own.unloading(R, 'a')).toBe(true);
    expect(asked).toEqual([R]);
    // The poll still decides: begun before the end, it reads nothing.
    own.polled(R, 99);
    expect(own.stateOf(R, 'a', 'loaded')).toBe('unloading');
    expect(asked).toEqual([R]);
    own.polled(R, 150);
    expect(own.stateOf(R, 'a', 'loaded')).toBe('loaded');
    // The shared state back after an outage: a later time, asked again.
    own.sharedAgain(900);
    expect(own.stateOf(R, 'a', 'loaded')).toBe('unloading');
    expect(own.stateOf(R, 'a', 'loaded')).toBe('unloading');
    expect(asked).toEqual([R, R]);
  });

  it('asks no poll where the store reads the adapter `unloading` itself: that read is the store’s, not its own end’s', () => {
    const own = new OwnUnloads();
    const asked: string[] = [];
    own.onUnpolled = (url) => asked.push(url);
    own.ended(R, 'a', 100, false);
    expect(own.stateOf(R, 'a', 'unloading')).toBe('unloading');
    const unloading = { ...loaded, state: 'unloading' as const };
    const views = [view(R, { adapter: unloading })];
    own.overlay(views, 'a');
    expect(views[0]!.adapter?.state).toBe('unloading');
    expect(asked).toEqual([]);
    // Read `loaded` there, it is this node's end alone: asked.
    expect(own.stateOf(R, 'a', 'loaded')).toBe('unloading');
    expect(asked).toEqual([R]);
  });

  it('says whether a poll begun at a time or later was applied: none on a replica it never polled', () => {
    // runtime-wiring.ts asks again for a poll that read nothing (`polledSince` false after the
    // asked poll): a runtime that just replaced another has polled no replica yet.
    const own = new OwnUnloads();
    expect(own.polledSince(R, 100)).toBe(false);
    own.polled(R, 100);
    // The asked poll begins in the millisecond of the ask.
    expect(own.polledSince(R, 100)).toBe(true);
    expect(own.polledSince(R, 101)).toBe(false);
    expect(own.polledSince(S, 0)).toBe(false);
    // An older poll applied later moves nothing back.
    own.polled(R, 50);
    expect(own.polledSince(R, 100)).toBe(true);
  });

  it('a runtime that replaced another asks for a poll for the older one’s unpolled end', () => {
    const old = new OwnUnloads();
    const next = new OwnUnloads();
    const asked: string[] = [];
    next.onUnpolled = (url) => asked.push(url);
    next.inherit(old);
    old.ended(R, 'a', 100, false);
    expect(next.stateOf(R, 'a', 'loaded')).toBe('unloading');
    expect(next.stateOf(S, 'a', 'loaded')).toBe('loaded');
    expect(asked).toEqual([R]);
  });
});
