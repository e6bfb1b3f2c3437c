/**
 * Kept schedules (./holds.ts) for "a replica Kong could not reach gets no request" (its 502/504 marks
 * it down; docs/reliability.md): markings against polls, stepped clocks, same-state successors.
 */
import { holds } from './holds';

describe('a replica Kong could not reach: every replica read down, one by a marking a poll begun before it reached Redis could not undo', () => {
  // Seed 2237878 (all 75 actions; dropping any one lets it pass; no fault, only requests longer than
  // the 5 s upstream timeout), the check's: node 2's request 6 on replica-0 got Kong's 504 at 6,254 ms;
  // node 1's poll of replica-0 began at 6,254.5 (after the 504), answered up at 6,255.5 and reached
  // Redis at 6,256.5, before the marking, which Redis applied at 6,258 dated on arrival: that poll is
  // older news (docs/reliability.md: a poll begun after the failure that answered before the marking
  // reached the store is overwritten by it), replica-0 down until the next poll. Node 0's 504 from
  // replica-1 (request 16, 6,265 ms) marked it down too; node 0's request at 6,520 read both down
  // and the health filter failed open onto replica-1, no poll of either begun since. The check took
  // replica-0 for up: it undid the marking by any poll begun after the 504, not after the marking
  // reached the store.
  it('seed 2237878: the other replica held down by a marking a poll begun after its 504 could not undo', async () => {
    await holds(
      2237878,
      {
        nodes: 3,
        replicas: 2,
        maxLoadedAdapters: 1,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math', 'law'],
        loadMs: 800,
        decodeMsPerStep: 100,
        coldLoadsPerMinute: 1000,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 1000,
        spanMs: 9548,
        queueTimeoutMs: 2218,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 500,
        maxNumSeqs: 4,
        sloClasses: [
          { name: 'interactive', ttft_ms: 1000, priority: 0 },
          { name: 'batch', ttft_ms: 52206, priority: -1 },
        ],
      },
      [
        { at: 31, kind: 'request', node: 1, adapter: 1, tokens: 6, prompt: 99 },
        { at: 276, kind: 'request', node: 2, adapter: -1, tokens: 2, prompt: 1262 },
        { at: 317, kind: 'request', node: 0, adapter: 1, tokens: 56, prompt: 1948, cls: 'interactive' },
        { at: 380, kind: 'request', node: 2, adapter: 2, tokens: 2, prompt: 1789 },
        { at: 447, kind: 'request', node: 0, adapter: 4, tokens: 5, prompt: 1543 },
        { at: 503, kind: 'request', node: 2, adapter: 2, tokens: 93, prompt: 792 },
        { at: 505, kind: 'request', node: 1, adapter: 0, tokens: 1, prompt: 175 },
        { at: 530, kind: 'request', node: 0, adapter: 1, tokens: 27, prompt: 1069, cls: 'interactive' },
        { at: 800, kind: 'request', node: 0, adapter: 0, tokens: 25, prompt: 1324, cls: 'interactive' },
        { at: 1015, kind: 'request', node: 2, adapter: 5, tokens: 3, prompt: 34 },
        { at: 1051, kind: 'request', node: 0, adapter: 6, tokens: 54, prompt: 1026, cls: 'interactive' },
        { at: 1066, kind: 'request', node: 1, adapter: 3, tokens: 6, prompt: 1869 },
        { at: 1124, kind: 'request', node: 2, adapter: 5, tokens: 5, prompt: 137 },
        { at: 1140, kind: 'request', node: 0, adapter: 0, tokens: 4, prompt: 930 },
        { at: 1207, kind: 'request', node: 1, adapter: 2, tokens: 6, prompt: 1379 },
        { at: 1263, kind: 'request', node: 0, adapter: -1, tokens: 50, prompt: 1951, cls: 'interactive' },
        { at: 1406, kind: 'request', node: 2, adapter: -1, tokens: 5, prompt: 1671 },
        { at: 1444, kind: 'request', node: 0, adapter: 6, tokens: 4, prompt: 1759 },
        { at: 1480, kind: 'request', node: 0, adapter: 5, tokens: 33, prompt: 1638, cls: 'interactive' },
        { at: 1625, kind: 'request', node: 0, adapter: 6, tokens: 28, prompt: 1552, cls: 'interactive' },
        { at: 1781, kind: 'request', node: 1, adapter: 0, tokens: 5, prompt: 142 },
        { at: 1820, kind: 'request', node: 1, adapter: 7, tokens: 4, prompt: 877 },
        { at: 1836, kind: 'request', node: 0, adapter: 2, tokens: 26, prompt: 1432, cls: 'interactive' },
        { at: 1883, kind: 'request', node: 0, adapter: 1, tokens: 1, prompt: 1957 },
        { at: 2021, kind: 'request', node: 0, adapter: 3, tokens: 49, prompt: 1428, cls: 'interactive' },
        { at: 2144, kind: 'request', node: 0, adapter: 6, tokens: 49, prompt: 1058, cls: 'interactive' },
        { at: 2258, kind: 'request', node: 0, adapter: 5, tokens: 30, prompt: 1549, cls: 'interactive' },
        { at: 2524, kind: 'request', node: 0, adapter: 5, tokens: 44, prompt: 1110, cls: 'interactive' },
        { at: 2539, kind: 'request', node: 0, adapter: -1, tokens: 2, prompt: 167, cls: 'batch' },
        { at: 2552, kind: 'request', node: 0, adapter: -1, tokens: 3, prompt: 131, cls: 'batch' },
        { at: 2681, kind: 'request', node: 0, adapter: 1, tokens: 34, prompt: 1115, cls: 'interactive' },
        { at: 2808, kind: 'request', node: 0, adapter: 3, tokens: 29, prompt: 1832, cls: 'interactive' },
        { at: 2918, kind: 'request', node: 0, adapter: 2, tokens: 40, prompt: 1489, cls: 'interactive' },
        { at: 3076, kind: 'request', node: 0, adapter: 2, tokens: 52, prompt: 1272, cls: 'interactive' },
        { at: 3278, kind: 'request', node: 0, adapter: 1, tokens: 49, prompt: 1129, cls: 'interactive' },
        { at: 3424, kind: 'request', node: 0, adapter: 0, tokens: 60, prompt: 1265, cls: 'interactive' },
        { at: 3524, kind: 'request', node: 0, adapter: 4, tokens: 32, prompt: 1612, cls: 'interactive' },
        { at: 3741, kind: 'request', node: 0, adapter: 4, tokens: 33, prompt: 1737, cls: 'interactive' },
        { at: 4029, kind: 'request', node: 0, adapter: -1, tokens: 30, prompt: 1340, cls: 'interactive' },
        { at: 4220, kind: 'request', node: 0, adapter: 3, tokens: 29, prompt: 1190, cls: 'interactive' },
        { at: 4452, kind: 'request', node: 0, adapter: 6, tokens: 52, prompt: 1163, cls: 'interactive' },
        { at: 4655, kind: 'request', node: 0, adapter: -1, tokens: 54, prompt: 1352, cls: 'interactive' },
        { at: 4831, kind: 'request', node: 0, adapter: 2, tokens: 35, prompt: 1750, cls: 'interactive' },
        { at: 5129, kind: 'request', node: 0, adapter: 2, tokens: 23, prompt: 1550, cls: 'interactive' },
        { at: 5230, kind: 'request', node: 1, adapter: 3, tokens: 3, prompt: 1809 },
        { at: 5333, kind: 'request', node: 0, adapter: 5, tokens: 34, prompt: 1182, cls: 'interactive' },
        { at: 5436, kind: 'request', node: 0, adapter: 7, tokens: 29, prompt: 1051, cls: 'interactive' },
        { at: 5570, kind: 'request', node: 0, adapter: 0, tokens: 57, prompt: 1183, cls: 'interactive' },
        { at: 5779, kind: 'request', node: 0, adapter: 0, tokens: 47, prompt: 1103, cls: 'interactive' },
        { at: 5785, kind: 'request', node: 1, adapter: 4, tokens: 4, prompt: 329 },
        { at: 5789, kind: 'request', node: 2, adapter: 4, tokens: 2, prompt: 1103 },
        { at: 5794, kind: 'request', node: 0, adapter: -1, tokens: 3, prompt: 51, cls: 'batch' },
        { at: 5881, kind: 'request', node: 0, adapter: 3, tokens: 33, prompt: 1571, cls: 'interactive' },
        { at: 6077, kind: 'request', node: 0, adapter: 4, tokens: 20, prompt: 1883, cls: 'interactive' },
        { at: 6241, kind: 'request', node: 0, adapter: -1, tokens: 42, prompt: 1122, cls: 'interactive' },
        { at: 6416, kind: 'request', node: 0, adapter: 2, tokens: 45, prompt: 1379, cls: 'interactive' },
        { at: 6520, kind: 'request', node: 0, adapter: 1, tokens: 51, prompt: 1143, cls: 'interactive' },
        { at: 6650, kind: 'request', node: 0, adapter: 0, tokens: 53, prompt: 1809, cls: 'interactive' },
        { at: 6797, kind: 'request', node: 0, adapter: 4, tokens: 24, prompt: 1868, cls: 'interactive' },
        { at: 6963, kind: 'request', node: 0, adapter: 1, tokens: 60, prompt: 1629, cls: 'interactive' },
        { at: 7129, kind: 'request', node: 0, adapter: 3, tokens: 52, prompt: 1690, cls: 'interactive' },
        { at: 7270, kind: 'request', node: 0, adapter: -1, tokens: 21, prompt: 1356, cls: 'interactive' },
        { at: 7465, kind: 'request', node: 0, adapter: 2, tokens: 40, prompt: 1381, cls: 'interactive' },
        { at: 7591, kind: 'request', node: 0, adapter: 7, tokens: 44, prompt: 1959, cls: 'interactive' },
        { at: 7838, kind: 'request', node: 0, adapter: 7, tokens: 60, prompt: 1145, cls: 'interactive' },
        { at: 8050, kind: 'request', node: 0, adapter: 7, tokens: 59, prompt: 1402, cls: 'interactive' },
        { at: 8159, kind: 'request', node: 0, adapter: 4, tokens: 29, prompt: 1502, cls: 'interactive' },
        { at: 8268, kind: 'request', node: 0, adapter: 2, tokens: 38, prompt: 1485, cls: 'interactive' },
        { at: 8375, kind: 'request', node: 0, adapter: 6, tokens: 59, prompt: 1090, cls: 'interactive' },
        { at: 8477, kind: 'request', node: 0, adapter: -1, tokens: 55, prompt: 1483, cls: 'interactive' },
        { at: 8742, kind: 'request', node: 0, adapter: 2, tokens: 47, prompt: 1064, cls: 'interactive' },
        { at: 8898, kind: 'request', node: 0, adapter: 7, tokens: 43, prompt: 2000, cls: 'interactive' },
        { at: 9147, kind: 'request', node: 0, adapter: 1, tokens: 43, prompt: 1638, cls: 'interactive' },
        { at: 9302, kind: 'request', node: 0, adapter: 3, tokens: 55, prompt: 1190, cls: 'interactive' },
        { at: 9530, kind: 'request', node: 0, adapter: 3, tokens: 38, prompt: 1707, cls: 'interactive' },
      ],
    );
  }, 60_000);
});

describe('a replica Kong could not reach, on a node whose wall clock was stepped back', () => {
  // Seed 2902860 (--keep 0,1,2,21,22,23,32), the kong-mark check's: node 0's wall clock was stepped
  // back 141 ms at 1,077 ms (a skew correction) and a Sentinel switch lost a write at 1,083, node 0
  // deciding alone by 1,100 (the marking reached its local store only). Its poll of replica-2 begun at 1,034.9 answered up; replica-2 restarted
  // at 1,100 and Kong's 502 for node 0's request 3 reached the log phase then. The local store dated
  // the marking by the stepped clock (959) and dropped it as older than that poll's start (1,034.9,
  // before the step), so node 0's request at 1,475 read replica-2 up and went there, no poll begun
  // since having answered. The memory store now orders a poll and a marking of one process on its
  // monotonic clock, which a step does not move.
  it('seed 2902860: a marking made after a step back of the clock holds over a poll begun before it', async () => {
    await holds(
      2902860,
      {
        nodes: 3,
        replicas: 3,
        maxLoadedAdapters: 4,
        adapters: ['sql', 'chat', 'team,a', 'team'],
        loadMs: 1500,
        decodeMsPerStep: 100,
        coldLoadsPerMinute: 1000,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 1000,
        spanMs: 4836,
        queueTimeoutMs: 2000,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 500,
        maxNumSeqs: 4,
        prefetch: { intervalMs: 500, halfLifeMs: 10000, loadsPerMinute: 30, hysteresis: 1, evictFactor: 1 },
      },
      [
        { at: 41, kind: 'request', node: 1, adapter: -1, tokens: 6, prompt: 912 },
        { at: 59, kind: 'request', node: 0, adapter: 1, tokens: 3, prompt: 1343 },
        { at: 100, kind: 'request', node: 0, adapter: -1, tokens: 23, prompt: 1424 },
        { at: 1077, kind: 'skew', node: 0, ms: -141 },
        { at: 1083, kind: 'switch', lost: 1 },
        { at: 1100, kind: 'replica-restart', replica: 2, downMs: 810 },
        { at: 1475, kind: 'request', node: 0, adapter: -1, tokens: 58, prompt: 1310 },
      ],
    );
  }, 60_000);
});

describe("a same-state successor's local copy knows its predecessor's replicas", () => {
  // Seed 3044962 (--keep 6,10,12,14,20,21), the kong-mark check's: Redis restarted empty at 459
  // (down 2,860 ms), node 1 deciding alone. Node 1's configuration changed at 544 to list replica-1
  // only (the previous one, listing all three, stays a stale worker's) and a `redis` record change
  // on the same state at 573 made runtime n1g0r1, whose local copy had only the new configuration's
  // replica registered: replica-0 and replica-2 were registered on its predecessor alone. Replica-1
  // restarted at 928; Kong's 502 for request 1 marked it down on n1g0r1 at 1,515. The stale
  // worker's request at 1,523, on the old configuration, was decided on n1g0r1 (`current()`), read
  // views of replica-1 only (the others unknown there), and the health filter, failing open, sent
  // it to replica-1 while replica-0 and replica-2 were up. The successor's local copy now takes the
  // predecessor's replicas (FailoverFleetStore.succeed), as Redis has them for both.
  it('seed 3044962: a stale worker after a same-state record change avoids a replica Kong could not reach', async () => {
    await holds(
      3044962,
      {
        nodes: 3,
        replicas: 3,
        maxLoadedAdapters: 2,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math', 'law', 'med', 'fin', 'bio'],
        loadMs: 200,
        decodeMsPerStep: 50,
        coldLoadsPerMinute: 6,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 1000,
        spanMs: 2000,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 2000,
        sloClasses: [
          { name: 'interactive', ttft_ms: 1000, priority: 0 },
          { name: 'batch', ttft_ms: 2500, priority: -1, max_in_flight: 2 },
        ],
        configChanges: { retainEveryMs: 10000, staleMs: 2316 },
      },
      [
        { at: 459, kind: 'redis-restart', empty: true, downMs: 2860 },
        { at: 544, kind: 'config-change', node: 1, replicas: [1] },
        { at: 573, kind: 'record-change', otherState: false, gapMs: 147 },
        { at: 928, kind: 'replica-restart', replica: 1, downMs: 1548 },
        { at: 1515, kind: 'request', node: 1, adapter: -1, tokens: 29, prompt: 21, cls: 'batch' },
        {
          at: 1523,
          kind: 'request',
          node: 1,
          adapter: -1,
          tokens: 13,
          prompt: 312,
          cls: 'batch',
          onOldConfig: true,
        },
      ],
    );
  }, 60_000);
});
