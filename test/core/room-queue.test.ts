import { RoomQueue } from '../../src/adapters/room-queue';
import type { Fence, ResidentAdapter } from '../../src/fleet/types';

const U = 'http://replica-1:8000';

/** Lets every queued promise callback run (the lock hands over through a few `then`s). */
async function settle(): Promise<void> {
  for (let i = 0; i < 20; i++) await Promise.resolve();
}

function resident(name: string): ResidentAdapter {
  return { name, state: 'loaded', since: 0, lastUsed: 0 } as ResidentAdapter;
}

/** A claim whose room-making ends when the test says so. */
function held(): { claim: () => Promise<Fence | null>; end: (f: Fence | null) => void; ran: () => boolean } {
  let end: (f: Fence | null) => void = () => {};
  let ran = false;
  const claim = () => {
    ran = true;
    return new Promise<Fence | null>((resolve) => (end = resolve));
  };
  return { claim, end: (f) => end(f), ran: () => ran };
}

/**
 * Review of b9c8955 (seed 2937): a load that stopped waiting leaves its turn in the lock's queue;
 * when that turn comes it must not take the place of a later load of the same adapter, or that
 * load waits for the lock again however often the holder reads its adapter resident (the cycle
 * seed 2937 found, back).
 */
describe('RoomQueue: a later load of the same adapter, queued behind a turn given up', () => {
  it('stops waiting once the holder reads its adapter resident', async () => {
    const q = new RoomQueue();
    const holder = held();
    const first = q.claim(U, 'h', holder.claim);
    await settle();
    expect(holder.ran()).toBe(true);
    // `x` queues, and another adapter's load behind it.
    const x1 = held();
    const gaveUp = q.claim(U, 'x', x1.claim);
    const z = held();
    const other = q.claim(U, 'z', z.claim);
    await settle();
    // The holder reads `x` resident: the first load of `x` is done waiting.
    q.seen(U, [resident('x')]);
    expect(await gaveUp).toBeNull();
    // `x` went again (say a peer unloaded it): a second load of it queues.
    const x2 = held();
    let secondDone: Fence | null | undefined;
    const second = q.claim(U, 'x', x2.claim).then((f) => (secondDone = f));
    await settle();
    // The holder ends: the given-up turn passes (no claim run), `z` holds the lock and waits for room.
    holder.end(null);
    expect(await first).toBeNull();
    await settle();
    expect(x1.ran()).toBe(false);
    expect(z.ran()).toBe(true);
    // `z`'s holder reads `x` resident again: the second load of `x` is done waiting too.
    q.seen(U, [resident('x')]);
    await settle();
    expect(secondDone).toBeNull();
    expect(x2.ran()).toBe(false);
    z.end(null);
    await other;
    await second;
  });
});
