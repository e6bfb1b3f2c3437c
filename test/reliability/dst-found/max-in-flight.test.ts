/**
 * Kept schedules (./holds.ts) for "a bounded class joins a replica at its bound only after its wait"
 * (max_in_flight, docs/reliability.md): the leases that count a replica's requests in flight.
 */
import { holds } from './holds';

describe('a bounded class joins a replica at its bound only after its wait: a base-model request outliving lease_max_age_ms', () => {
  // Seed 834440 (--keep 0,1,3,4,5,8,10,11,12,13,14,15,16,17,18,19,24,25,27,28,29,36,37,41,42,43,44,45,46,47,48,56,57,63):
  // node 1's base-model request 21, sent to replica-0 at 2,060 ms, runs past `lease_max_age_ms`
  // (4 s; 54 tokens at 100 ms a step). Its lease, no adapter's, was never renewed by the polls
  // that found the replica busy: reclaimed at about 6,060 ms while it ran. Node 0's batch request
  // 33 (`max_in_flight` 3), held at the bound since 4,929 ms, read 2 in flight at 6,112 ms (30 and
  // 31) and joined as the fourth. Polls now renew base-model leases while the replica runs or
  // queues requests (src/fleet/memory-leases.ts, the residency script).
  it('seed 834440: a base-model request longer than lease_max_age_ms stays in flight', async () => {
    await holds(
      834440,
      {
        nodes: 3,
        replicas: 3,
        maxLoadedAdapters: 2,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math', 'law', 'med', 'fin', 'bio'],
        loadMs: 800,
        decodeMsPerStep: 100,
        coldLoadsPerMinute: 3,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 1000,
        spanMs: 6000,
        staticAdapters: ['sql,chat'],
        queueTimeoutMs: 2000,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 2000,
        maxNumSeqs: 4,
        sloClasses: [
          { name: 'interactive', ttft_ms: 1000, priority: 0 },
          { name: 'batch', ttft_ms: 2500, priority: -1, max_in_flight: 3 },
        ],
      },
      [
        { at: 34, kind: 'request', node: 0, adapter: 6, tokens: 6, prompt: 1817 },
        { at: 278, kind: 'request', node: 2, adapter: 0, tokens: 6, prompt: 1804, cls: 'batch' },
        { at: 409, kind: 'request', node: 1, adapter: 9, tokens: 5, prompt: 1551, cls: 'batch' },
        { at: 482, kind: 'request', node: 2, adapter: 2, tokens: 109, prompt: 601, cls: 'interactive' },
        { at: 499, kind: 'request', node: 0, adapter: 0, tokens: 3, prompt: 1163, cls: 'batch' },
        { at: 1043, kind: 'request', node: 1, adapter: 2, tokens: 4, prompt: 1388, cls: 'interactive' },
        { at: 1150, kind: 'request', node: 1, adapter: 1, tokens: 24, prompt: 1144, cls: 'batch' },
        { at: 1189, kind: 'request', node: 0, adapter: 3, tokens: 5, prompt: 397, cls: 'batch' },
        { at: 1248, kind: 'request', node: 0, adapter: 6, tokens: 3, prompt: 17, cls: 'batch' },
        { at: 1261, kind: 'request', node: 1, adapter: 7, tokens: 35, prompt: 1261 },
        { at: 1263, kind: 'request', node: 2, adapter: 9, tokens: 6, prompt: 821 },
        { at: 1311, kind: 'request', node: 1, adapter: 6, tokens: 38, prompt: 1262, cls: 'batch' },
        { at: 1337, kind: 'request', node: 1, adapter: 6, tokens: 39, prompt: 1213, cls: 'interactive' },
        { at: 1402, kind: 'request', node: 0, adapter: 9, tokens: 6, prompt: 986, cls: 'batch' },
        { at: 1441, kind: 'request', node: 1, adapter: 1, tokens: 58, prompt: 1350, cls: 'interactive' },
        { at: 1543, kind: 'request', node: 1, adapter: -1, tokens: 37, prompt: 1646, cls: 'interactive' },
        { at: 1729, kind: 'request', node: 1, adapter: 1, tokens: 21, prompt: 1151, cls: 'interactive' },
        { at: 1751, kind: 'request', node: 1, adapter: -1, tokens: 33, prompt: 1572, cls: 'batch' },
        { at: 1889, kind: 'request', node: 1, adapter: -1, tokens: 34, prompt: 1500, cls: 'batch' },
        { at: 1981, kind: 'request', node: 1, adapter: 7, tokens: 56, prompt: 1925, cls: 'interactive' },
        { at: 2058, kind: 'request', node: 1, adapter: -1, tokens: 54, prompt: 1279, cls: 'batch' },
        { at: 2362, kind: 'request', node: 2, adapter: 5, tokens: 14, prompt: 456, cls: 'batch' },
        { at: 2371, kind: 'request', node: 1, adapter: 7, tokens: 40, prompt: 1530, cls: 'batch' },
        { at: 2720, kind: 'request', node: 1, adapter: 7, tokens: 57, prompt: 1720 },
        { at: 2955, kind: 'request', node: 1, adapter: 1, tokens: 58, prompt: 1631, cls: 'interactive' },
        { at: 3161, kind: 'request', node: 1, adapter: -1, tokens: 34, prompt: 1115, cls: 'batch' },
        { at: 3620, kind: 'request', node: 1, adapter: 1, tokens: 33, prompt: 1156 },
        { at: 3670, kind: 'request', node: 1, adapter: 7, tokens: 40, prompt: 1174, cls: 'batch' },
        { at: 3699, kind: 'request', node: 1, adapter: 7, tokens: 37, prompt: 1686, cls: 'interactive' },
        { at: 3838, kind: 'request', node: 1, adapter: -1, tokens: 34, prompt: 1363, cls: 'batch' },
        { at: 3935, kind: 'request', node: 1, adapter: -1, tokens: 36, prompt: 1382, cls: 'interactive' },
        { at: 4901, kind: 'request', node: 1, adapter: 6, tokens: 36, prompt: 1856, cls: 'interactive' },
        { at: 4926, kind: 'request', node: 0, adapter: 0, tokens: 3, prompt: 15, cls: 'batch' },
        { at: 5088, kind: 'request', node: 1, adapter: 1, tokens: 38, prompt: 1586, cls: 'interactive' },
      ],
    );
  }, 30_000);
});

describe('a request decided again on the newest runtime, past one sharing its lease prefix', () => {
  // Seed 3129582 (--keep 8,10,11,15,16,17,18,19,25,26,27,28,29,30,31,32,33), the max_in_flight
  // check's: node 0's batch request 3 (came at 780 on runtime n0g0) waited for room while a record
  // change to other state (860) made runtime n0g0r1 and one to the same state (1,597) its successor,
  // sharing its lease prefix and sequence. Replaced by other state, request 3 was decided again on
  // the runtime current then, the same-state successor, and sent to replica-1 at 1,877. Batch
  // request 6 had come at 1,332 on n0g0r1 (node 0 cut off from Redis, deciding alone) and was
  // decided there, on its views read alone at 1,360, at 2,361: request 3's lease is the successor's,
  // which no view it read could show. The check named a request's decider by its lease prefix, the
  // first runtime with it (n0g0r1 for both), and so held request 6 to request 3 as its own runtime's.
  // It now names the runtime that handed out the lease id.
  it('seed 3129582: a lease of a same-state successor is not its predecessor decision’s own', async () => {
    await holds(
      3129582,
      {
        nodes: 3,
        replicas: 2,
        maxLoadedAdapters: 1,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math', 'law', 'med', 'fin', 'bio'],
        loadMs: 800,
        decodeMsPerStep: 50,
        coldLoadsPerMinute: 1000,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 1000,
        spanMs: 4282,
        staticAdapters: ['sql,chat'],
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 500,
        sloClasses: [
          { name: 'interactive', ttft_ms: 1000, priority: 0 },
          { name: 'batch', ttft_ms: 2500, priority: -1, max_in_flight: 1 },
        ],
        configChanges: { retainEveryMs: 1000, staleMs: 2405 },
      },
      [
        { at: 713, kind: 'request', node: 0, adapter: 3, tokens: 4, prompt: 1289, cls: 'batch' },
        {
          at: 779,
          kind: 'request',
          node: 0,
          adapter: 8,
          tokens: 6,
          prompt: 1768,
          cls: 'interactive',
          onOldConfig: true,
        },
        { at: 780, kind: 'request', node: 0, adapter: 2, tokens: 4, prompt: 1605, cls: 'batch' },
        { at: 782, kind: 'slow-path', node: 0, replica: 1, ms: 741, hopMs: 2067 },
        { at: 809, kind: 'config-change', node: 0, replicas: [1] },
        { at: 822, kind: 'partition', node: 0, ms: 648 },
        { at: 860, kind: 'record-change', otherState: true, gapMs: 87 },
        { at: 929, kind: 'config-change', node: 2, replicas: [1] },
        {
          at: 1252,
          kind: 'request',
          node: 2,
          adapter: -1,
          tokens: 19,
          prompt: 299,
          cls: 'batch',
          onOldConfig: true,
        },
        { at: 1301, kind: 'request', node: 0, adapter: 10, tokens: 5, prompt: 259, cls: 'batch' },
        { at: 1332, kind: 'request', node: 0, adapter: -1, tokens: 12, prompt: 167, cls: 'batch' },
        { at: 1345, kind: 'request', node: 0, adapter: -1, tokens: 29, prompt: 327, cls: 'batch' },
        { at: 1583, kind: 'request', node: 2, adapter: 5, tokens: 5, prompt: 1747, cls: 'interactive' },
        { at: 1583, kind: 'request', node: 1, adapter: 2, tokens: 1, prompt: 33, onOldConfig: true },
        { at: 1589, kind: 'request', node: 0, adapter: 0, tokens: 2, prompt: 750, cls: 'interactive' },
        { at: 1597, kind: 'record-change', otherState: false, gapMs: 1283 },
        { at: 2860, kind: 'request', node: 1, adapter: 5, tokens: 3, prompt: 1311, cls: 'interactive' },
      ],
    );
  }, 60_000);
});

describe('a bounded class joins a replica at its bound only after its wait: a lease reclaimed on the wire', () => {
  // Seed 3169793 (--keep 0,1,2,3,5,8,13,14,15,24,25): replica-1 hangs from 1,644 ms for 1,774 ms.
  // Node 2's batch request 8 (`max_in_flight` 2) is sent into the hang at 1,661 ms: never in the
  // engine, so no poll finds its adapter running or waiting, and Kong waits for it until its
  // upstream timeout (5 s). Its lease, renewed by nothing, is reclaimed by age (4 s) at about
  // 5,700 ms. Node 1's batch request 9 goes there at 5,350 ms; node 2's batch request 10, held at
  // the bound (2) since 5,358 ms, read 1 in flight at 5,978 ms (the view: request 9; node 2's own
  // open lease of request 8, 1, not added to it) and joined. First excused by the check
  // (`leaseAgedOut`), now counted: the views tell node 2's own leases apart (ReplicaView.ownInFlight),
  // and src/router/in-flight-here.ts adds every lease node 2 holds open to node 1's. Failed before
  // with the check's excuse narrowed to other runtimes (request 10 joined with requests 8 and 9).
  it('seed 3169793: a request sent into a hang, its lease reclaimed by age, still counts on its node', async () => {
    await holds(
      3169793,
      {
        nodes: 3,
        replicas: 2,
        maxLoadedAdapters: 2,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code'],
        loadMs: 200,
        decodeMsPerStep: 50,
        coldLoadsPerMinute: 3,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 0,
        spanMs: 6000,
        queueTimeoutMs: 4000,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 2000,
        sloClasses: [
          { name: 'interactive', ttft_ms: 1000, priority: 0 },
          { name: 'batch', ttft_ms: 2500, priority: -1, max_in_flight: 2 },
        ],
      },
      [
        { at: 190, kind: 'request', node: 1, adapter: 1, tokens: 5, prompt: 680, cls: 'interactive' },
        { at: 250, kind: 'request', node: 0, adapter: 1, tokens: 5, prompt: 365 },
        { at: 458, kind: 'request', node: 2, adapter: 2, tokens: 2, prompt: 1369, cls: 'batch' },
        { at: 520, kind: 'request', node: 1, adapter: 2, tokens: 2, prompt: 665 },
        { at: 883, kind: 'request', node: 2, adapter: 3, tokens: 5, prompt: 341, cls: 'interactive' },
        { at: 987, kind: 'request', node: 0, adapter: -1, tokens: 2, prompt: 973, cls: 'interactive' },
        { at: 1644, kind: 'replica-outage', replica: 1, ms: 1774, mode: 'hang' },
        { at: 1650, kind: 'request', node: 1, adapter: 0, tokens: 2, prompt: 179, cls: 'batch' },
        { at: 1657, kind: 'request', node: 2, adapter: 3, tokens: 2, prompt: 1171, cls: 'batch' },
        { at: 5346, kind: 'request', node: 1, adapter: 1, tokens: 14, prompt: 139, cls: 'batch' },
        { at: 5356, kind: 'request', node: 2, adapter: 1, tokens: 15, prompt: 30, cls: 'batch' },
      ],
    );
  }, 30_000);
});
