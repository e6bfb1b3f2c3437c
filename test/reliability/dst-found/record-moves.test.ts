/**
 * Kept schedules (./holds.ts) with a node's router moved to the other state's replicas
 * (dst/config-draw.ts `drawRecordPlugins`), each a gap in the checks the moves opened, not the
 * router's (found by the sweep of 3,400,000-3,409,999 on branch registry-dst).
 */
import type { Schedule } from '../../../dst/schedule';
import { holds } from './holds';

const WORLD1: Schedule['world'] = {
  nodes: 3,
  replicas: 3,
  maxLoadedAdapters: 4,
  adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math', 'law', 'med', 'fin'],
  loadMs: 800,
  decodeMsPerStep: 100,
  coldLoadsPerMinute: 3,
  leaseMaxAgeMs: 4000,
  ttftSloMs: 1000,
  spanMs: 2000,
  upstreamTimeoutMs: 5000,
  nodeTtlMs: 500,
  sloClasses: [
    { name: 'interactive', ttft_ms: 1000, priority: 0 },
    { name: 'batch', ttft_ms: 2500, priority: -1, max_in_flight: 2 },
  ],
  prefetch: { intervalMs: 1000, halfLifeMs: 3000, loadsPerMinute: 1, hysteresis: 0.5, evictFactor: 1 },
  configChanges: {
    retainEveryMs: 10000,
    staleMs: 1707,
    poller: { lagMs: 982, timeout: 0 },
    move: { away: [2] },
  },
};
const ACTIONS1: Schedule['actions'] = [
  { at: 786, kind: 'move', node: 2, replicas: [2] },
  {
    at: 977,
    kind: 'request',
    node: 0,
    adapter: 7,
    tokens: 1,
    prompt: 1387,
    cls: 'interactive',
    sourceMs: 183,
    onOldConfig: true,
  },
  {
    at: 988,
    kind: 'request',
    node: 0,
    adapter: 2,
    tokens: 3,
    prompt: 1714,
    exit: true,
    exitStatus: 503,
    onOldConfig: true,
  },
  {
    at: 997,
    kind: 'request',
    node: 2,
    adapter: 1,
    tokens: 3,
    prompt: 1860,
    cls: 'batch',
    gaveUp: { afterMs: 1096, unwritten: true, noticeMs: 161 },
    sourceMs: 208,
  },
  { at: 1014, kind: 'request', node: 2, adapter: 8, tokens: 3, prompt: 458, cls: 'interactive' },
  { at: 1374, kind: 'request', node: 2, adapter: 7, tokens: 1, prompt: 24, cls: 'batch' },
  { at: 68726, kind: 'request', node: 2, adapter: 0, tokens: 1, prompt: 533 },
  { at: 68848, kind: 'request', node: 0, adapter: 4, tokens: 3, prompt: 1655 },
  { at: 69163, kind: 'request', node: 2, adapter: 3, tokens: 1, prompt: 1603 },
  { at: 69376, kind: 'request', node: 0, adapter: 8, tokens: 5, prompt: 1630 },
  { at: 69448, kind: 'request', node: 1, adapter: 0, tokens: 34, prompt: 207 },
];
const WORLD2: Schedule['world'] = {
  nodes: 3,
  replicas: 3,
  maxLoadedAdapters: 1,
  adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math', 'law', 'med'],
  loadMs: 200,
  decodeMsPerStep: 50,
  coldLoadsPerMinute: 6,
  leaseMaxAgeMs: 4000,
  ttftSloMs: 1000,
  spanMs: 4659,
  queueTimeoutMs: 2000,
  upstreamTimeoutMs: 5000,
  nodeTtlMs: 500,
  maxNumSeqs: 4,
  sloClasses: [
    { name: 'interactive', ttft_ms: 1000, priority: 0 },
    { name: 'batch', ttft_ms: 2500, priority: -1, max_in_flight: 1 },
  ],
  configChanges: {
    retainEveryMs: 10000,
    staleMs: 2393,
    poller: { lagMs: 1236, timeout: 0 },
    move: { away: [2] },
  },
};
const ACTIONS2: Schedule['actions'] = [
  {
    at: 488,
    kind: 'request',
    node: 0,
    adapter: -1,
    tokens: 52,
    prompt: 1692,
    cls: 'interactive',
    gaveUp: { afterMs: 2706, unwritten: false, noticeMs: 148 },
    sourceMs: 159,
    onOldConfig: true,
  },
  {
    at: 519,
    kind: 'request',
    node: 0,
    adapter: -1,
    tokens: 23,
    prompt: 1312,
    cls: 'batch',
    onOldConfig: true,
  },
  { at: 768, kind: 'move', node: 0, replicas: [2] },
  {
    at: 870,
    kind: 'request',
    node: 0,
    adapter: 2,
    tokens: 45,
    prompt: 1626,
    sourceMs: 173,
    onOldConfig: true,
  },
  { at: 1475, kind: 'replica-restart', replica: 0, downMs: 870 },
  {
    at: 1661,
    kind: 'request',
    node: 0,
    adapter: 0,
    tokens: 45,
    prompt: 1236,
    cls: 'interactive',
    onOldConfig: true,
  },
];

const WORLD3: Schedule['world'] = {
  nodes: 3,
  replicas: 3,
  maxLoadedAdapters: 2,
  adapters: ['sql', 'chat', 'team,a', 'team'],
  loadMs: 200,
  decodeMsPerStep: 100,
  coldLoadsPerMinute: 3,
  leaseMaxAgeMs: 4000,
  ttftSloMs: 1000,
  spanMs: 6967,
  staticAdapters: ['sql,chat'],
  queueTimeoutMs: 2000,
  upstreamTimeoutMs: 5000,
  nodeTtlMs: 500,
  maxNumSeqs: 4,
  prefetch: { intervalMs: 500, halfLifeMs: 3000, loadsPerMinute: 30, hysteresis: 0.5, evictFactor: 8 },
  configChanges: {
    retainEveryMs: 10000,
    staleMs: 688,
    poller: { lagMs: 2931, timeout: 0 },
    move: { away: [2] },
  },
};
const ACTIONS3: Schedule['actions'] = [
  { at: 2, kind: 'request', node: 0, adapter: 1, tokens: 6, prompt: 1409 },
  {
    at: 2,
    kind: 'request',
    node: 0,
    adapter: 2,
    tokens: 5,
    prompt: 72,
    exit: true,
    sourceMs: 81,
    onOldConfig: true,
  },
  { at: 8, kind: 'request', node: 0, adapter: 0, tokens: 1, prompt: 1927, sourceMs: 78, onOldConfig: true },
  { at: 713, kind: 'move', node: 0, replicas: [2] },
  { at: 826, kind: 'partition', node: 0, ms: 5605 },
  {
    at: 6920,
    kind: 'request',
    node: 0,
    adapter: 0,
    tokens: 58,
    prompt: 1861,
    gaveUp: { afterMs: 187, unwritten: true, noticeMs: 316 },
    onOldConfig: true,
  },
];

const WORLD4: Schedule['world'] = {
  nodes: 3,
  replicas: 3,
  maxLoadedAdapters: 2,
  adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math', 'law', 'med', 'fin', 'bio'],
  loadMs: 1500,
  decodeMsPerStep: 100,
  coldLoadsPerMinute: 3,
  leaseMaxAgeMs: 4000,
  ttftSloMs: 0,
  spanMs: 2000,
  queueTimeoutMs: 4000,
  upstreamTimeoutMs: 5000,
  nodeTtlMs: 2000,
  configChanges: { retainEveryMs: 1000, staleMs: 17, poller: { timeout: 0 }, move: { away: [2] } },
};
const ACTIONS4: Schedule['actions'] = [
  { at: 493, kind: 'config-change', node: 1, replicas: [0, 1] },
  { at: 702, kind: 'record-change', otherState: true, gapMs: 452 },
  { at: 1351, kind: 'move', node: 1, replicas: [2] },
];

describe('schedules with record moves', () => {
  // Seed 3405639 (--keep 7,8,9,10,11,12,36,37,39,42,43): node 2 moves to db 1 and replica 2 at 786 ms,
  // back to db 0 at 74,810 ms (left out). Two states, two cold-load budgets at once, each its own window
  // (docs/reliability.md "The cold-load budget": per shared state): the fleet-wide count saw 10 loads in
  // 67.9 s for 9 allowed. The check now counts each replica group (the moved record's, the others') alone.
  it("seed 3405639: each state's replicas within its own cold-load budget", async () => {
    await holds(3405639, WORLD1, ACTIONS1);
  }, 60_000);

  // Seed 3405723 (--keep 10,11,15,16,26,29): node 0 moves to db 1 at 768 ms; a request begun before on db 0
  // met Kong's 502 from restarting replica-0 and its log phase marked it down on the db 0 runtime; a stale
  // worker's request at 1,661 ms, through the old configuration, decided on that runtime too. The check had
  // both on the node's newest runtime (db 1), which had heard of neither. It now takes the runtime a
  // request's service decides on, and a marking where the lease's runtime is (log-phase.ts).
  it("seed 3405723: a stale worker's request after a move is judged on the runtime it decided on", async () => {
    await holds(3405723, WORLD2, ACTIONS2);
  }, 60_000);

  // Seed 3434914 (--keep 0,1,2,15,16,80; the lead's sweep of 49dbc658): node 0's runtime on db 0 loads three
  // adapters on replicas 0 and 1 at 37-43 ms; the node moves to db 1 and replica 2 at 713 ms and is cut
  // off from Redis at 826 ms; at 6,920 ms its db 1 runtime, deciding alone, loads `sql` on replica 2. The
  // share a node grants alone is its state's (docs/reliability.md "The cold-load budget": per shared
  // state), and db 1's had spent nothing. The check counted the process's loads on both states as one
  // share (4 for 3); it now counts those of the replica group the load's budget pays, as the fleet-wide
  // count does with moves (seed 3405639).
  it("seed 3434914: a node deciding alone after a move grants from the new state's share", async () => {
    await holds(3434914, WORLD3, ACTIONS3);
  }, 60_000);

  // Seed 3441398 (--keep 5,9,14; the lead's sweep of 49dbc658): node 1's configuration changes at 493 ms (the
  // superseded one, __seq__ 1, lists replicas 0-2, last used then); every node's record changes to db 1 from
  // 702 ms, carrying node 1's claims there; at 1,351 ms node 1 moves back to db 0 with replica 2 only. At
  // 6,397 ms its db 0 runtime's retain forgets replica 0 there, which no runtime on db 0 routes to. The
  // check held the superseded configuration's claim on db 0, its record's state, though its runtime had
  // handed its claims to db 1 (`claimedSpecs`) and the runtime back on db 0 never ran it (used again, it
  // would register there then). It now counts an old configuration only while its runtime's claims stayed
  // on that state.
  it("seed 3441398: a superseded configuration's claims go with its runtime to the other state", async () => {
    await holds(3441398, WORLD4, ACTIONS4);
  }, 60_000);
});
