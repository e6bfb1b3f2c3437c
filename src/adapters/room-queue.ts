import type { Fence, ResidentAdapter } from '../fleet/types';
import { KeyedLock } from '../keyed-lock';

/** A load queued here: how its wait ends early. */
type Queued = { giveUp: () => void };

/**
 * The loads of this process queued behind a replica's room lock, by replica and adapter. The
 * lock's holder may be waiting for an adapter to go idle that a queued request's own lease keeps
 * busy, while a node sharing the store makes the queued one's adapter resident there: a cycle
 * within the process that only the holder's deadline ended (dst seed 2937 --no-overload, no fault
 * drawn: `sql` resident on replica-2 from 2,070 ms, node 0's request of 754 ms for it queued until
 * 7 s, one of 1,821 ms joining it refused 503 "its load is still under way"). So each residents
 * read the holder makes (Room.claimSlot, every ROOM_FALLBACK_MS at most while it waits) ends the
 * queued waits of the adapters it shows there, as their own first look would: no store read more.
 * A queued wait has no wake of its own either: its load keeps its callers' leases young on a timer
 * (AdapterManager.ensure), even while the holder is inside one unload call or replica read.
 */
export class RoomQueue {
  /** Serialises room-making per replica within this process. */
  private readonly lock = new KeyedLock();
  private readonly queued = new Map<string, Map<string, Queued>>();

  /**
   * Runs `claim` under the room lock for `url`; null without running it if `name` is read resident
   * there (`seen`) while still queued.
   */
  async claim(url: string, name: string, claim: () => Promise<Fence | null>): Promise<Fence | null> {
    let locked = false;
    let gaveUp = false;
    let leave = () => {};
    const left = new Promise<null>((resolve) => (leave = () => resolve(null)));
    let here = this.queued.get(url);
    if (!here) this.queued.set(url, (here = new Map()));
    const mine: Queued = {
      giveUp: () => {
        gaveUp = true;
        leave();
      },
    };
    here.set(name, mine);
    const claimed = this.lock.run(url, () => {
      locked = true;
      this.leave(url, name, mine);
      return gaveUp ? Promise.resolve(null) : claim();
    });
    try {
      return await Promise.race([claimed, left]);
    } finally {
      if (!locked) this.leave(url, name, mine);
    }
  }

  /** The lock's holder read `residents` on `url` (any state): the loads queued for them are done waiting. */
  seen(url: string, residents: readonly ResidentAdapter[]): void {
    const here = this.queued.get(url);
    if (here) for (const r of residents) here.get(r.name)?.giveUp();
  }

  /**
   * Ends this wait's entry only: a turn given up still comes round in the lock's queue, and by
   * then a later load of the same adapter may wait under that name (it must stay seen).
   */
  private leave(url: string, name: string, mine: Queued): void {
    const here = this.queued.get(url);
    if (here?.get(name) !== mine) return;
    here.delete(name);
    if (here.size === 0) this.queued.delete(url);
  }
}
