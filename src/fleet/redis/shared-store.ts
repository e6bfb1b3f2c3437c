/**
 * What a failover store asks of the shared side: the store operations, a cheap liveness check,
 * and what it needs to hand back leases and budget spends after an outage or an emptied state.
 */
import type { FleetStore, LoadEnd } from '../store';
import type { NodeCount } from './live-nodes';
import type { Fence } from '../types';

/** What the shared side must offer besides the store operations: a cheap liveness check. */
export interface SharedStore extends FleetStore {
  ping(): Promise<unknown>;
  /** This node's id in the shared state (its lease prefix): the node its views count apart (`ownInFlight`). */
  readonly node?: string;
  /**
   * As the store's, `own`: only this node's lock under `fence`. A server that lost a lock (a
   * Sentinel switch, a restart from a snapshot) may hand its fence out again to another node
   * when its counter ran ahead of its clock; the end this node owes the old lock is not theirs.
   */
  finishLoad(
    url: string,
    adapter: string,
    fence: Fence,
    ok: LoadEnd,
    at: number,
    own?: boolean,
  ): Promise<boolean>;
  finishUnload(
    url: string,
    adapter: string,
    fence: Fence,
    ok: boolean,
    at: number,
    own?: boolean,
  ): Promise<boolean>;
  holds(url: string, adapter: string, fence: Fence, own?: boolean): Promise<boolean>;
  /** Whether the shared state was emptied since last asked (its epoch changed or vanished). */
  takeStateLost?(): boolean;
  /** Told when the shared state was found emptied outside a decision (a heartbeat). */
  onStateLost?: (() => void) | null;
  /**
   * Nodes sharing the state, as last seen: this node's share of a budget during an outage. Null
   * (or absent) until the state first answered this process: then its share is nothing.
   */
  readonly liveNodes?: number | null;
  /** The count behind `liveNodes`, with since when a lower one is held off (live-nodes.ts). */
  readonly nodeCount?: NodeCount;
  /**
   * Takes the count a runtime this one replaces on the same state kept, if none was seen yet: the
   * node's count, held for the window as there (a new link's first whole count, read after
   * nodes cut off earlier fell silent, is lower).
   */
  inheritNodeCount?(count: NodeCount): void;
  /** The shared state's epoch as last seen (null before any): spends are counted under it. */
  readonly currentEpoch?: string | null;
  /** Takes the epoch a runtime this one replaces on the same state saw, if none was seen yet. */
  inheritEpoch?(epoch: string | null): void;
  /** Adds cold loads counted during an outage to the current window of `key`. */
  addToBudget?(key: string, count: number, windowMs: number): Promise<void>;
  /**
   * Drops this node's leases in the shared state that `held` (read just before the call is sent)
   * does not name; `leaving`: the node leaves this state for good.
   */
  prune?(held: () => string[], leaving?: boolean): Promise<number>;
}
