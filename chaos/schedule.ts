/**
 * The nemesis's schedule, drawn from a seed: one fault at a time, as Jepsen's nemesis runs a
 * fault, heals it and rests before the next. Same seed and duration, same schedule.
 */
import { seededRandom, type Random } from '../src/random';

export type Fault =
  /** One node's link to Redis cut (its proxy) for `ms`, then restored. */
  | { kind: 'partition'; node: number; mode: 'blackhole' | 'refuse'; ms: number }
  /** FLUSHALL on the shared Redis, behind every node's back. */
  | { kind: 'flushall' }
  /** Redis restarted: with persistence it comes back with its data, without it empty. */
  | { kind: 'redis-restart'; persist: boolean; downMs: number }
  /**
   * Every node's `redis` record changed, one node after the other within `staggerMs` (Kong
   * pushes a configuration to its nodes in turn): `state` moves to the other database,
   * `timeouts` keeps the state and changes `timeout_ms` and `node_ttl_ms`.
   */
  | { kind: 'redis-record'; change: 'state' | 'timeouts'; staggerMs: number }
  /** One node's clock `ms` ahead for `forMs`, then back. */
  | { kind: 'clock-skew'; node: number; ms: number; forMs: number };

export interface ScheduledFault {
  /** ms after traffic started. */
  at: number;
  fault: Fault;
}

export interface ScheduleOptions {
  seed: number;
  /** Faults start within [startMs, endMs). */
  startMs: number;
  endMs: number;
  nodes: number;
  skewMs: number;
  /** Longest partition; a partition longer than `node_ttl_ms` makes the node look dead. */
  maxPartitionMs: number;
}

const KINDS: Fault['kind'][] = ['partition', 'flushall', 'redis-restart', 'redis-record', 'clock-skew'];

/** How long a fault lasts before it is healed (the next starts after it and a rest). */
export function faultDuration(f: Fault): number {
  switch (f.kind) {
    case 'partition':
      return f.ms;
    case 'redis-restart':
      return f.downMs;
    case 'redis-record':
      return f.staggerMs;
    case 'clock-skew':
      return f.forMs;
    case 'flushall':
      return 0;
  }
}

/**
 * Faults in turn, each kind as likely, with a rest of 1-3 s after each. The first five go
 * through every kind once (shuffled), so even a short run meets each.
 */
export function makeSchedule(o: ScheduleOptions): ScheduledFault[] {
  const rnd = seededRandom(o.seed);
  const out: ScheduledFault[] = [];
  const firsts = shuffle([...KINDS], rnd);
  let t = o.startMs;
  while (t < o.endMs) {
    const kind = firsts.shift() ?? pick(KINDS, rnd);
    const fault = draw(kind, o, rnd);
    out.push({ at: Math.round(t), fault });
    t += faultDuration(fault) + 1000 + rnd() * 2000;
  }
  return out;
}

function draw(kind: Fault['kind'], o: ScheduleOptions, rnd: Random): Fault {
  const node = Math.floor(rnd() * o.nodes);
  switch (kind) {
    case 'partition':
      return {
        kind,
        node,
        mode: rnd() < 0.5 ? 'blackhole' : 'refuse',
        ms: Math.round(500 + rnd() * (o.maxPartitionMs - 500)),
      };
    case 'flushall':
      return { kind };
    case 'redis-restart':
      return { kind, persist: rnd() < 0.5, downMs: Math.round(100 + rnd() * 900) };
    case 'redis-record':
      return { kind, change: rnd() < 0.5 ? 'state' : 'timeouts', staggerMs: Math.round(rnd() * 500) };
    case 'clock-skew':
      return { kind, node, ms: o.skewMs, forMs: Math.round(2000 + rnd() * 4000) };
  }
}

function pick<T>(xs: readonly T[], rnd: Random): T {
  return xs[Math.floor(rnd() * xs.length)]!;
}

function shuffle<T>(xs: T[], rnd: Random): T[] {
  for (let i = xs.length - 1; i > 0; i--) {
    const j = Math.floor(rnd() * (i + 1));
    [xs[i], xs[j]] = [xs[j]!, xs[i]!];
  }
  return xs;
}

/** One line per fault, for the report. */
export function describeFault(f: Fault): string {
  switch (f.kind) {
    case 'partition':
      return `partition node ${f.node} from Redis (${f.mode}) for ${f.ms} ms`;
    case 'flushall':
      return 'FLUSHALL';
    case 'redis-restart':
      return `Redis restart ${f.persist ? 'with' : 'without'} persistence, down ${f.downMs} ms`;
    case 'redis-record':
      return `redis record change (${f.change === 'state' ? 'other database' : 'same state, other timeouts'}) on every node within ${f.staggerMs} ms`;
    case 'clock-skew':
      return `node ${f.node} clock ${f.ms} ms ahead for ${f.forMs} ms`;
  }
}
