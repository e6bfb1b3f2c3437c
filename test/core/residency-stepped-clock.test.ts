/**
 * The memory store (a node's own, and its local copy deciding alone) matches a poll's adapter list
 * against the loads and unloads this process made since the poll began. It orders them on the
 * process's monotonic clock: a skew correction stepping the wall clock back between a poll's start
 * and a load's or unload's end dated that end before the poll, and the older list outdid it.
 */
import { MemoryFleetStore } from '../../src/fleet/memory-store';
import { SteppedClock } from './helpers';

const U = 'http://10.0.0.1:8000';
const load = { waiting: 0, running: 0, activeAdapters: [], malformedLines: 0 };

describe('the memory store matching a poll against loads and unloads across a wall-clock step', () => {
  const clock = new SteppedClock();
  let store: MemoryFleetStore;
  const begin = () => ({ wall: clock.now(), mono: clock.monotonic() });
  /** A poll of this process begun at `began`, its adapter list `names`, applied now. */
  const polled = (began: { wall: number; mono: number }, names: string[]) =>
    store.applySnapshot(U, {
      at: clock.now(),
      startedAt: began.wall,
      monoStartedAt: began.mono,
      monoAt: clock.monotonic(),
      ok: true,
      load,
      registry: names.map((name) => ({ name, path: `/lora/${name}` })),
      managed: () => true,
    });
  const state = async (name: string) => (await store.residents(U)).find((a) => a.name === name)?.state;
  const loaded = async (name: string) => {
    const fence = (await store.beginLoad(U, name, clock.now(), 4))!;
    expect(await store.finishLoad(U, name, fence, true, clock.now())).toBe(true);
  };

  beforeEach(async () => {
    clock.t = 1000;
    clock.skew = 0;
    store = new MemoryFleetStore(clock);
    await store.upsertReplica({ url: U, backend: 'vllm', priority: 0 });
    await polled(begin(), []);
  });

  it('keeps a load that ended after a poll began, the clock stepped back between, over its older list', async () => {
    clock.t = 2000;
    const before = begin(); // the poll reads the list before the load lands
    clock.t = 2010;
    clock.skew = -141;
    await loaded('a');
    clock.t = 2100;
    await polled(before, []);
    expect(await state('a')).toBe('loaded');
    // A poll begun after the load, not listing it: gone (a restart).
    clock.t = 2200;
    await polled(begin(), []);
    expect(await state('a')).toBeUndefined();
  });

  it('keeps an unload that ended after a poll began, the clock stepped back between, gone', async () => {
    clock.t = 1500;
    await loaded('a');
    clock.t = 2000;
    const before = begin(); // the poll reads the list before the unload lands
    clock.t = 2010;
    clock.skew = -141;
    const fence = (await store.beginUnload(U, 'a', clock.now()))!;
    expect(await store.finishUnload(U, 'a', fence, true, clock.now())).toBe(true);
    clock.t = 2100;
    await polled(before, ['a']);
    expect(await state('a')).toBeUndefined();
    // A poll begun after the unload that lists it (another node loaded it again): adopted.
    clock.t = 2200;
    await polled(begin(), ['a']);
    expect(await state('a')).toBe('loaded');
  });

  it('keeps a failed load gone over the list of a poll begun before, the clock stepped back', async () => {
    clock.t = 2000;
    const fence = (await store.beginLoad(U, 'a', clock.now(), 4))!;
    clock.t = 2050;
    const before = begin(); // the load landed on the replica, then failed to answer
    clock.t = 2060;
    clock.skew = -141;
    expect(await store.finishLoad(U, 'a', fence, false, clock.now())).toBe(true);
    clock.t = 2100;
    await polled(before, ['a']);
    expect(await state('a')).toBeUndefined();
  });

  it('orders on the wall clock as before where nothing steps', async () => {
    clock.t = 2000;
    const before = begin();
    clock.t = 2010;
    await loaded('a');
    clock.t = 2100;
    await polled(before, []);
    expect(await state('a')).toBe('loaded');
    clock.t = 2200;
    await polled(begin(), []);
    expect(await state('a')).toBeUndefined();
  });
});
