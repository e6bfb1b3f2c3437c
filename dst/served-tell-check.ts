/**
 * The log phase's tell "a request of this node ended there" (src/router/log-phase.ts `releaseLease`
 * -> ReplicaWord `servedEnded`) is the unseen hold's excuse for a poll's busy reading
 * (docs/reliability.md, "An adapter someone unseen routes is held"), so it must be true of the
 * world: told only of a request the replica answered (not one whose client gave up, 499, which the
 * replica may run on or never have had; not one a later plugin answered, source 'exit'; not Kong's
 * own 502/504), and dated no later than its log phase's start (a poll begun during the source
 * call's round trip cannot have read it running: review 64c). Judged against what Kong met, the
 * world's side: the tells are watched by wrapping `servedEnded` once, as dst/lease-watch.ts does.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { ReplicaWord } from '../src/adapters/replica-word';
import { monotonic, type Clock } from '../src/clock';

export const SERVED_TELL_INVARIANT =
  "a request's end is told only of one the replica answered, as of its log phase's start";

/** One tell made during a log phase: its date and, then, its runtime's monotonic clock and the world's time. */
interface Tell {
  url: string;
  adapter: string;
  at: number;
  monoThen: number;
  worldThen: number;
}

/** The log phase under way in this async context: the tells it made. */
const logging = new AsyncLocalStorage<Tell[]>();

const told = ReplicaWord.prototype.servedEnded;
ReplicaWord.prototype.servedEnded = function (this: ReplicaWord, url: string, adapter: string, at?: number) {
  const tells = logging.getStore();
  if (tells) {
    const mono = monotonic((this as unknown as { clock: Clock }).clock);
    tells.push({ url, adapter, at: at ?? mono, monoThen: mono, worldThen: worldNow() });
  }
  return told.call(this, url, adapter, at);
};

/** The world's time, for dating tells against the log phase's start (set by the world running). */
let worldNow: () => number = () => 0;

/**
 * Runs `fn` with its tells unwatched: a planted-bug suite that shows another check catching a log
 * phase that also tells wrongly (test/reliability/dst-kong-marks.test.ts).
 */
export function unwatched<T>(fn: () => T): T {
  return logging.exit(fn);
}

/** Runs log phase `fn` of a request, from world time `now()`; returns the tells it made. */
export async function watchTells(now: () => number, fn: () => Promise<void>): Promise<Tell[]> {
  worldNow = now;
  const tells: Tell[] = [];
  await logging.run(tells, fn);
  return tells;
}

/**
 * What is wrong with `tells` of a log phase begun at world time `startedAt` whose answer was
 * `answer` (undefined: nothing). `answered`: the replica answered it (source 'service', not a 499).
 */
export function tellWrong(
  tells: readonly Tell[],
  startedAt: number,
  answered: boolean,
  answer: string,
): string | undefined {
  if (tells.length === 0) return undefined;
  const t = tells[0]!;
  if (!answered) return `told as ended at ${t.url} (${t.adapter}) though ${answer}`;
  for (const x of tells) {
    // The runtime's monotonic clock at the log phase's start (it runs with the world's time).
    const startMono = x.monoThen - (x.worldThen - startedAt);
    if (x.at > startMono + DATING_SLACK_MS)
      return `its end at ${x.url} (${x.adapter}) dated ${Math.round(x.at - startMono)} ms after its log phase began`;
  }
  return undefined;
}

/** Far below any source call's round trip the world draws (1 ms at least), above a double's rounding. */
const DATING_SLACK_MS = 1e-6;
