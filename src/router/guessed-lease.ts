import { LeaseHandle } from '../lease';
import type { ResidencyState } from '../fleet/types';
import type { FleetRuntime } from '../runtime';
import { releaseLease } from './log-phase';

/** Adapters whose last replica is remembered (the one guess a request's lease is taken on). */
const LAST_REPLICAS = 4096;

/**
 * A lease taken with the views, on the replica the adapter's last request went to, before the
 * decision: used if the decision goes there, else given back as the decision is known. With a
 * shared store this saves the access phase a round trip (views and lease in one script).
 */
export interface GuessedLease {
  held?: { lease: LeaseHandle; state: ResidencyState | undefined };
}

/**
 * Gives the guessed lease back, unused. The decision does not wait for it: the lease leaves this
 * process's counts as its release begins (LeaseHandle `ending`), a replaced runtime drains on it
 * until the store has it, and waiting cost a round trip (a timeout on a slow link) during which
 * the node could see the decided replica down (seed 1635447). A failure is logged. Its release's
 * promise when it has one (for tests), else undefined.
 */
export function giveBack(rt: FleetRuntime, guess: GuessedLease): Promise<void> | undefined {
  const held = guess.held;
  if (!held) return undefined;
  guess.held = undefined;
  try {
    // No request of it ran there: what a poll read running is someone else's.
    const released = releaseLease(held.lease, undefined, false);
    return released?.catch((err: Error) => notGivenBack(rt, held.lease, err));
  } catch (err) {
    notGivenBack(rt, held.lease, err as Error);
    return undefined;
  }
}

function notGivenBack(rt: FleetRuntime, lease: LeaseHandle, err: Error): void {
  rt.log.warn(`could not give back lease ${lease.id}: ${err.message}`);
}

/**
 * The guessed lease if the decision went to its replica, else a new one (the guess given back).
 * In the call when it needs no round trip (the guess, or an in-process store: LeaseHandle.takeNow).
 */
export function takeLease(
  rt: FleetRuntime,
  url: string,
  adapter: string | null,
  guess: GuessedLease,
): Taken | Promise<Taken> {
  const held = guess.held;
  if (held && held.lease.lease.url === url) {
    guess.held = undefined;
    return held;
  }
  giveBack(rt, guess);
  return LeaseHandle.takeNow(rt, url, adapter) ?? LeaseHandle.take(rt, url, adapter);
}

/** A lease taken, with its adapter's state under it. */
export type Taken = { lease: LeaseHandle; state: ResidencyState | undefined };

/** Per adapter ('' the base model): the replica its last request was admitted on, bounded. */
export class LastReplicas {
  private readonly last = new Map<string, string>();

  get(adapter: string | null): string | undefined {
    return this.last.get(adapter ?? '');
  }

  /** Remembers where `adapter`'s request was admitted (the next one's guess), the oldest out past the bound. */
  remember(adapter: string | null, url: string): void {
    const key = adapter ?? '';
    if (this.last.get(key) === url) return;
    this.last.delete(key);
    if (this.last.size >= LAST_REPLICAS) this.last.delete(this.last.keys().next().value!);
    this.last.set(key, url);
  }
}
