/**
 * Unit test of nextNodeCount (src/fleet/redis/live-nodes.ts, one module), written against the
 * survivors of its mutation run (docs/reliability/mutation-testing.md): how many nodes share the
 * state, the divisor of a node's cold-load share while it decides alone. A state younger than
 * node_ttl_ms only raises the count; a whole count lower than before is held for one budget
 * window (60 s of the state's age) before it is believed; a state of unknown age is taken as read.
 */
import { nextNodeCount, NO_COUNT } from '../../src/fleet/redis/live-nodes';

const TTL = 10_000;
const W = 60_000;

describe('nextNodeCount', () => {
  it('a state younger than node_ttl_ms only raises a count seen before, and grants nothing before one', () => {
    expect(nextNodeCount(NO_COUNT, 5, 100, TTL)).toEqual(NO_COUNT);
    // A state of age 0 is young: a lower count then starts no window.
    expect(nextNodeCount({ nodes: 3, lowerSince: null }, 1, 0, TTL)).toEqual({ nodes: 3, lowerSince: null });
    expect(nextNodeCount({ nodes: 3, lowerSince: 7 }, 1, 100, TTL)).toEqual({ nodes: 3, lowerSince: 7 });
    expect(nextNodeCount({ nodes: 2, lowerSince: null }, 5, 0, TTL)).toEqual({ nodes: 5, lowerSince: null });
    expect(nextNodeCount({ nodes: 3, lowerSince: null }, 1, TTL - 1, TTL)).toEqual({
      nodes: 3,
      lowerSince: null,
    });
  });

  it('a whole count (age node_ttl_ms or more) is taken when first seen, higher, equal, or of unknown age', () => {
    expect(nextNodeCount(NO_COUNT, 4, TTL, TTL)).toEqual({ nodes: 4, lowerSince: null });
    expect(nextNodeCount(NO_COUNT, 0, TTL, TTL)).toEqual({ nodes: 1, lowerSince: null });
    expect(nextNodeCount({ nodes: 3, lowerSince: 20_000 }, 3, 30_000, TTL)).toEqual({
      nodes: 3,
      lowerSince: null,
    });
    expect(nextNodeCount({ nodes: 3, lowerSince: 20_000 }, 4, 30_000, TTL)).toEqual({
      nodes: 4,
      lowerSince: null,
    });
    expect(nextNodeCount({ nodes: 3, lowerSince: null }, 1, -1, TTL)).toEqual({ nodes: 1, lowerSince: null });
    expect(nextNodeCount({ nodes: 3, lowerSince: null }, 0, -1, TTL)).toEqual({ nodes: 1, lowerSince: null });
  });

  it('a lower whole count is held at the larger one for one budget window of the state’s age', () => {
    const first = nextNodeCount({ nodes: 3, lowerSince: null }, 1, TTL, TTL);
    expect(first).toEqual({ nodes: 3, lowerSince: TTL });
    expect(nextNodeCount(first, 2, TTL + W - 1, TTL)).toEqual({ nodes: 3, lowerSince: TTL });
    expect(nextNodeCount(first, 2, TTL + W, TTL)).toEqual({ nodes: 2, lowerSince: null });
    expect(nextNodeCount({ nodes: 3, lowerSince: null }, 0, 0, 0)).toEqual({ nodes: 3, lowerSince: 0 });
  });

  it('a lowerSince past the state’s age (another epoch’s) starts the window again', () => {
    expect(nextNodeCount({ nodes: 3, lowerSince: 90_000 }, 1, 20_000, TTL)).toEqual({
      nodes: 3,
      lowerSince: 20_000,
    });
    expect(nextNodeCount({ nodes: 3, lowerSince: 90_000 }, 1, 20_000 + W, TTL)).toEqual({
      nodes: 3,
      lowerSince: 20_000 + W,
    });
  });
});
