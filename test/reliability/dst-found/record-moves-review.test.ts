/**
 * Kept schedules (./holds.ts) with a node's router moved to the other state's replicas, each a gap
 * in the checks the moves opened, not the router's (found by review-registry's sweep of
 * 3,440,000-3,442,999 on the merge of registry-dst).
 */
import type { Schedule } from '../../../dst/schedule';
import { holds } from './holds';

const SLO_CLASSES = [
  { name: 'interactive', ttft_ms: 1000, priority: 0 },
  { name: 'batch', ttft_ms: 2500, priority: -1, max_in_flight: 3 },
];
const ADAPTERS = ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math', 'law', 'med', 'fin', 'bio'];

const ALONE_WORLD: Schedule['world'] = {
  nodes: 3,
  replicas: 2,
  maxLoadedAdapters: 2,
  adapters: ADAPTERS,
  loadMs: 800,
  decodeMsPerStep: 50,
  coldLoadsPerMinute: 3,
  leaseMaxAgeMs: 4000,
  ttftSloMs: 0,
  spanMs: 2000,
  staticAdapters: ['sql,chat'],
  queueTimeoutMs: 4000,
  upstreamTimeoutMs: 5000,
  nodeTtlMs: 500,
  sloClasses: SLO_CLASSES,
  prefetch: { intervalMs: 500, halfLifeMs: 1000, loadsPerMinute: 1, hysteresis: 0.5, evictFactor: 8 },
  configChanges: {
    retainEveryMs: 1000,
    staleMs: 613,
    poller: { lagMs: 991, timeout: 1 },
    move: { away: [1] },
  },
};
const ALONE_ACTIONS: Schedule['actions'] = [
  {
    at: 472,
    kind: 'request',
    node: 0,
    adapter: 2,
    tokens: 4,
    prompt: 542,
    cls: 'interactive',
    gaveUp: { afterMs: 1311, unwritten: true, noticeMs: 0 },
    sourceMs: 10,
  },
  { at: 1022, kind: 'move', node: 0, replicas: [1] },
  {
    at: 1848,
    kind: 'request',
    node: 0,
    adapter: 2,
    tokens: 13,
    prompt: 208,
    cls: 'batch',
    exit: true,
    exitStatus: 503,
  },
  {
    at: 1855,
    kind: 'request',
    node: 0,
    adapter: 2,
    tokens: 24,
    prompt: 186,
    cls: 'batch',
    gaveUp: { afterMs: 2300, unwritten: true, noticeMs: 180 },
    sourceMs: 182,
    onOldConfig: true,
  },
  { at: 1879, kind: 'partition', node: 0, ms: 1561 },
  {
    at: 1929,
    kind: 'request',
    node: 0,
    adapter: 6,
    tokens: 3,
    prompt: 143,
    gaveUp: { afterMs: 925, unwritten: false, noticeMs: 488 },
    sourceMs: 92,
  },
];

describe('schedules with record moves (review-registry)', () => {
  // Seed 3441001 (--keep 4,9,25,26,27,28): node 0 loads on replica 0 (db 0) at 491 ms, moves to db 1 and
  // replica 1 at 1,022 ms (a move replaces no runtime: no grants carried), then loads there once shared
  // and twice cut off: 3 of db 1's budget of 3, the node alone on db 1. The node-share check counted the
  // process's load calls on both states as one share (4 for 3), as the fleet check did before seed 3405639.
  it("seed 3441001: a node's share judged per state's budget after a move", async () => {
    await holds(3441001, ALONE_WORLD, ALONE_ACTIONS);
  }, 60_000);
});
