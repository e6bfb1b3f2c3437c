/**
 * Kept schedules (./holds.ts) for "a replica seen down gets no request" (docs/reliability.md) when
 * nodes decide alone: polls handed on once Redis is back, after an emptied state, polls timed out or
 * under way.
 */
import { WORLD, holds } from './holds';

describe('schedules the simulation found', () => {
  // Seed 1025140 (--keep 4,5,8,9,11,12): replica-1 answers 500 on every route from 1411 ms and
  // every node is cut off from Redis from 1540 to 2610 ms. Node 1's load of `code` there, sent at
  // 1404 ms, lands at 3876 ms; its poll at 2985 ms saw replica-1 down, but only its local store
  // heard (it still decided alone). Back on Redis, its after-load check read Redis's health, the
  // last written before the cut (up at 1040 ms), and the request went to replica-1, down 2.5 s.
  // A node back from deciding alone now hands Redis the replicas its polls found down meanwhile.
  it('seed 1025140: a replica polled down while every node decided alone reads down once Redis is back', async () => {
    await holds(
      1025140,
      {
        ...WORLD,
        replicas: 2,
        maxLoadedAdapters: 4,
        adapters: WORLD.adapters.slice(0, 9),
        ttftSloMs: 0,
        spanMs: 2000,
        queueTimeoutMs: 4000,
        upstreamTimeoutMs: 5000,
      },
      [
        { at: 841, kind: 'request', node: 2, adapter: 4, tokens: 1, prompt: 510 },
        { at: 934, kind: 'request', node: 2, adapter: 0, tokens: 6, prompt: 1496 },
        { at: 1321, kind: 'request', node: 0, adapter: 0, tokens: 3, prompt: 1020 },
        { at: 1394, kind: 'request', node: 1, adapter: 5, tokens: 6, prompt: 1705 },
        { at: 1411, kind: 'replica-outage', replica: 1, ms: 2635, mode: 'error500' },
        { at: 1540, kind: 'partition', node: -1, ms: 1070 },
      ],
    );
  }, 30_000);
  // Seed 1039269 (--keep 0,1,3,6,7,9,15), the same break through a fresh decision: a Redis
  // restart (379-772 ms, from a snapshot) leaves every node deciding alone while replica-0
  // restarts (682-2499 ms); each node polls it down into its local store only. Node 0, back on
  // Redis, read replica-0 up as last polled at 102 ms and sent its request at 1817 ms there.
  it('seed 1039269: a replica polled down during a Redis restart reads down once Redis is back', async () => {
    await holds(
      1039269,
      {
        ...WORLD,
        replicas: 2,
        adapters: WORLD.adapters.slice(0, 8),
        loadMs: 200,
        decodeMsPerStep: 50,
        ttftSloMs: 0,
        spanMs: 2000,
        queueTimeoutMs: 4000,
        upstreamTimeoutMs: 5000,
      },
      [
        { at: 99, kind: 'request', node: 2, adapter: 5, tokens: 3, prompt: 1695 },
        { at: 121, kind: 'replica-outage', replica: 0, ms: 1246, mode: 'error500' },
        { at: 379, kind: 'redis-restart', empty: false, downMs: 393 },
        { at: 682, kind: 'replica-restart', replica: 0, downMs: 1817 },
        { at: 710, kind: 'request', node: 1, adapter: 6, tokens: 4, prompt: 1467 },
        { at: 763, kind: 'request', node: 0, adapter: 7, tokens: 40, prompt: 1689 },
        { at: 1817, kind: 'request', node: 0, adapter: -1, tokens: 3, prompt: 1954 },
      ],
    );
  }, 30_000);
});

describe('a replica seen down gets no request: a node back from deciding alone hands on what it polled up', () => {
  // Seed 503368 (--keep 7,9,10,12,13,16,17,21,22,23; the router's): node 2 polls replica-0 down in
  // its restart (628-1,440 ms), the last poll Redis hears before the partition (1,006-3,545 ms);
  // every node then polls replica-0 up and replica-1 down (500s from 1,984 ms) in its local store
  // alone. Back on Redis (~4,060-4,080 ms) the nodes pushed their downs but not their ups: Redis
  // read both down, the health filter failed open, and a request waiting for room went to replica-1
  // (full schedule: node 0 at 4,085 ms, 2,101 ms into its outage; this one: node 2 at 4,076 ms,
  // 2,092 ms). The ups are handed on too now.
  it('seed 503368: a replica polled up while cut off reads up once back, not the down Redis heard before', async () => {
    await holds(
      503368,
      {
        nodes: 3,
        replicas: 2,
        maxLoadedAdapters: 1,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math', 'law', 'med', 'fin'],
        loadMs: 1500,
        decodeMsPerStep: 50,
        coldLoadsPerMinute: 1000,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 0,
        spanMs: 4073,
        queueTimeoutMs: 4000,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 500,
      },
      [
        { at: 573, kind: 'flushall' },
        { at: 573, kind: 'request', node: 0, adapter: 8, tokens: 1, prompt: 1576 },
        { at: 628, kind: 'replica-restart', replica: 0, downMs: 812 },
        { at: 897, kind: 'request', node: 2, adapter: 8, tokens: 6, prompt: 1904 },
        { at: 1006, kind: 'partition', node: -1, ms: 2539 },
        { at: 1267, kind: 'request', node: 2, adapter: 0, tokens: 2, prompt: 1090 },
        { at: 1318, kind: 'request', node: 0, adapter: 0, tokens: 2, prompt: 1656 },
        { at: 1984, kind: 'replica-outage', replica: 1, ms: 2782, mode: 'error500' },
        { at: 1999, kind: 'slow', node: 2, ms: 232, slowMs: 1025 },
        { at: 2766, kind: 'request', node: 1, adapter: 1, tokens: 1, prompt: 1657 },
      ],
    );
  }, 30_000);
});

describe('a replica seen down gets no request: decisions read after an emptied state wait for the reclaim', () => {
  // Seed 542328 (--keep 3,...,34,42,...,57 of 58: a crowd of requests at node 1, no SLO classes; the
  // router's): replica-2 answers 500 from 269 ms, every node polls it down (node 1 at 1,087 ms), and node
  // 1 holds crowd requests for the TTFT objective. A FLUSHALL at 1,877 ms; node 0 finds it (1,895) and
  // registers every replica again. Node 1's held base-model request reads its views at 1,901 ms: every
  // replica `unknown`, and the reply says the state was emptied. Node 1 reclaims (registers, hands on
  // its downs: replica-2 at 1,916) and then decided on the views read before, replica-2, proxied there
  // at 1,924 ms. In the full seed, held requests read the views while node 1's reclaim was under way
  // (1,961 ms) and one was proxied to replica-2 at 1,987 ms. Either read is now made again after it.
  it('seed 542328: views read while the node reclaims an emptied state are read again once its downs are handed on', async () => {
    await holds(
      542328,
      {
        nodes: 3,
        replicas: 3,
        maxLoadedAdapters: 4,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math', 'law', 'med', 'fin'],
        loadMs: 1500,
        decodeMsPerStep: 100,
        coldLoadsPerMinute: 1000,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 1000,
        spanMs: 4415,
        queueTimeoutMs: 2000,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 500,
        maxNumSeqs: 4,
      },
      [
        { at: 269, kind: 'replica-outage', replica: 2, ms: 2254, mode: 'error500' },
        { at: 360, kind: 'request', node: 0, adapter: 0, tokens: 3, prompt: 1715 },
        { at: 565, kind: 'switch', lost: 3 },
        { at: 741, kind: 'request', node: 2, adapter: 0, tokens: 6, prompt: 1816 },
        { at: 846, kind: 'replica-outage', replica: 0, ms: 714, mode: 'error500' },
        { at: 939, kind: 'request', node: 1, adapter: 3, tokens: 4, prompt: 1211 },
        { at: 1027, kind: 'request', node: 1, adapter: 2, tokens: 52, prompt: 1061 },
        { at: 1044, kind: 'request', node: 2, adapter: 0, tokens: 1, prompt: 401 },
        { at: 1046, kind: 'request', node: 1, adapter: -1, tokens: 57, prompt: 1174 },
        { at: 1145, kind: 'request', node: 1, adapter: -1, tokens: 45, prompt: 1815 },
        { at: 1153, kind: 'request', node: 1, adapter: 6, tokens: 31, prompt: 1653 },
        { at: 1230, kind: 'request', node: 2, adapter: 8, tokens: 6, prompt: 1246 },
        { at: 1231, kind: 'request', node: 2, adapter: -1, tokens: 1, prompt: 438 },
        { at: 1245, kind: 'request', node: 1, adapter: 6, tokens: 36, prompt: 1540 },
        { at: 1302, kind: 'request', node: 1, adapter: -1, tokens: 55, prompt: 1776 },
        { at: 1354, kind: 'request', node: 1, adapter: -1, tokens: 47, prompt: 1906 },
        { at: 1354, kind: 'request', node: 1, adapter: 6, tokens: 28, prompt: 1725 },
        { at: 1417, kind: 'request', node: 1, adapter: 1, tokens: 2, prompt: 1420 },
        { at: 1510, kind: 'request', node: 1, adapter: 2, tokens: 59, prompt: 1833 },
        { at: 1574, kind: 'request', node: 1, adapter: 9, tokens: 41, prompt: 1852 },
        { at: 1663, kind: 'request', node: 1, adapter: -1, tokens: 36, prompt: 1832 },
        { at: 1736, kind: 'request', node: 1, adapter: 9, tokens: 54, prompt: 1587 },
        { at: 1739, kind: 'request', node: 1, adapter: -1, tokens: 47, prompt: 1153 },
        { at: 1752, kind: 'request', node: 1, adapter: 6, tokens: 26, prompt: 1887 },
        { at: 1778, kind: 'request', node: 1, adapter: 6, tokens: 43, prompt: 1807 },
        { at: 1814, kind: 'request', node: 1, adapter: -1, tokens: 49, prompt: 1166 },
        { at: 1821, kind: 'request', node: 1, adapter: 6, tokens: 51, prompt: 1240 },
        { at: 1832, kind: 'request', node: 0, adapter: 4, tokens: 2, prompt: 889 },
        { at: 1850, kind: 'request', node: 1, adapter: 9, tokens: 43, prompt: 1265 },
        { at: 1877, kind: 'flushall' },
        { at: 1956, kind: 'request', node: 1, adapter: 6, tokens: 5, prompt: 646 },
        { at: 2034, kind: 'request', node: 1, adapter: 9, tokens: 55, prompt: 1293 },
        { at: 2709, kind: 'request', node: 1, adapter: 2, tokens: 38, prompt: 1663 },
        { at: 2776, kind: 'request', node: 1, adapter: -1, tokens: 32, prompt: 1051 },
        { at: 2806, kind: 'request', node: 1, adapter: 6, tokens: 32, prompt: 1300 },
        { at: 2859, kind: 'request', node: 1, adapter: 6, tokens: 40, prompt: 1499 },
        { at: 3104, kind: 'request', node: 1, adapter: 2, tokens: 39, prompt: 1442 },
        { at: 3149, kind: 'request', node: 1, adapter: 2, tokens: 27, prompt: 1410 },
        { at: 3154, kind: 'request', node: 1, adapter: 2, tokens: 45, prompt: 1988 },
        { at: 3195, kind: 'request', node: 1, adapter: 9, tokens: 32, prompt: 1338 },
        { at: 3558, kind: 'request', node: 1, adapter: 6, tokens: 45, prompt: 1206 },
        { at: 3629, kind: 'request', node: 1, adapter: -1, tokens: 39, prompt: 1231 },
        { at: 3650, kind: 'request', node: 1, adapter: 6, tokens: 60, prompt: 1594 },
        { at: 3653, kind: 'request', node: 1, adapter: 2, tokens: 27, prompt: 1614 },
        { at: 3687, kind: 'request', node: 1, adapter: -1, tokens: 54, prompt: 1116 },
        { at: 3742, kind: 'request', node: 1, adapter: -1, tokens: 36, prompt: 1006 },
        { at: 3921, kind: 'request', node: 1, adapter: 9, tokens: 49, prompt: 1070 },
        { at: 4344, kind: 'request', node: 1, adapter: 6, tokens: 35, prompt: 1613 },
      ],
    );
  }, 30_000);
});

describe('a replica seen down gets no request: deciding alone, from the next poll after one that timed out', () => {
  // Seed 1646547 (--keep 0,1,2,3,10,13; the check's): node 0's path to replica-1 is slow from 113 ms
  // (2,372 ms each way), node 0 is cut off from Redis from 779 ms (deciding alone: its health is its
  // own polls), and replica-1 answers 500 from 1,086 ms. Node 0's poll of replica-1 begun at 1,427 ms
  // crossed the slow path and timed out at 2,427; its round at 1,951 skipped replica-1 (that poll
  // still under way), and the next came at about 2,950. Its request proxied at 2,845 ms went to
  // replica-1, which no poll of node 0 had read down: the check counted from the outage's start (1,759
  // ms). Deciding alone, a node now sees the down from its next poll after one that timed out.
  it('seed 1646547: a node deciding alone whose poll of the replica timed out on a slow path', async () => {
    await holds(
      1646547,
      {
        nodes: 3,
        replicas: 2,
        maxLoadedAdapters: 2,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a'],
        loadMs: 800,
        decodeMsPerStep: 100,
        coldLoadsPerMinute: 3,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 1000,
        spanMs: 4936,
        staticAdapters: ['sql,chat'],
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 500,
        sloClasses: [
          { name: 'interactive', ttft_ms: 1000, priority: 0 },
          { name: 'batch', ttft_ms: 2500, priority: -1 },
        ],
      },
      [
        { at: 13, kind: 'request', node: 0, adapter: 0, tokens: 6, prompt: 331, cls: 'interactive' },
        { at: 14, kind: 'request', node: 0, adapter: 1, tokens: 1, prompt: 778, cls: 'interactive' },
        { at: 17, kind: 'request', node: 0, adapter: 2, tokens: 2, prompt: 635, cls: 'batch' },
        { at: 113, kind: 'slow-path', node: 0, replica: 1, ms: 1373, hopMs: 2372 },
        { at: 779, kind: 'partition', node: 0, ms: 4845 },
        { at: 1086, kind: 'replica-outage', replica: 1, ms: 2676, mode: 'error500' },
      ],
    );
  }, 30_000);
  // Seed 2676738 (--keep 0,2,3,4,5,9,10,13,23; the check's): replica-1's scrape times out 600-934 ms,
  // so node 0's poll of it begun at 627 ms timed out at 1,627 (its round at 1,091 skipped it, that
  // poll under way); replica-1 answers 500 from 952 ms; every node is cut off from Redis from 1,771.
  // Node 0's next poll (2,075.8 ms) read the 500 at 2,076.8, and its write waited for the shared
  // clock read beside it, sent into the partition, to time out (about 2,576). Node 0's request for
  // `team,a` (553 ms), deciding alone after its wait, read replica-1 unknown in its local store and
  // went there at 2,573 ms, 496 ms after that verdict. The check took the verdict as sight from the
  // 500's start (1,621 ms before); the timeout before it held that poll back as with no verdict yet.
  it('seed 2676738: a verdict after the poll that timed out counts from that timeout', async () => {
    await holds(
      2676738,
      {
        nodes: 3,
        replicas: 2,
        maxLoadedAdapters: 2,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math', 'law', 'med', 'fin'],
        loadMs: 1500,
        decodeMsPerStep: 50,
        coldLoadsPerMinute: 1000,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 1000,
        spanMs: 5772,
        staticAdapters: ['sql,chat'],
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 500,
        queueTimeoutMs: 2000,
        maxNumSeqs: 4,
        prefetch: { intervalMs: 2000, halfLifeMs: 1000, loadsPerMinute: 1, hysteresis: 1, evictFactor: 2 },
      },
      [
        { at: 83, kind: 'request', node: 1, adapter: 0, tokens: 2, prompt: 573 },
        { at: 358, kind: 'replica-restart', replica: 0, downMs: 45 },
        { at: 521, kind: 'request', node: 0, adapter: 1, tokens: 3, prompt: 1719 },
        { at: 553, kind: 'request', node: 0, adapter: 2, tokens: 6, prompt: 1805 },
        { at: 600, kind: 'scrape', replica: 1, ms: 334, mode: 'timeout' },
        { at: 610, kind: 'request', node: 0, adapter: 6, tokens: 6, prompt: 1707 },
        { at: 611, kind: 'flushall' },
        { at: 952, kind: 'replica-outage', replica: 1, ms: 1903, mode: 'error500' },
        { at: 1771, kind: 'partition', node: -1, ms: 811 },
      ],
    );
  }, 30_000);
});

describe('a replica seen down gets no request: deciding alone, not before the poll under way began', () => {
  // Seed 1729199 (--keep 5,7,12,14,17,18,20; the check's): replica-0 refuses from 179 ms (restarts
  // at 179 and 723, up again at 2,529); node 2 is cut off from Redis from 835 ms and its path to
  // replica-0 is slow from 1,036 (2,042 ms each way). Node 2's last poll of replica-0 that ended
  // began at 20 ms (up); its next round waited out Redis's timeout and began its poll at 1,514 ms,
  // deciding alone from then; that poll was still crossing the slow path when node 2 routed a
  // request there at 1,844. No poll of node 2 could have read the refusal yet: the check counted
  // from the refusal's start. Deciding alone, a node now sees a down no earlier than its poll under
  // way began, unless a poll of its begun after the down has ended with a verdict.
  it('seed 1729199: a node deciding alone whose poll of the replica is still on a slow path', async () => {
    await holds(
      1729199,
      {
        nodes: 3,
        replicas: 2,
        maxLoadedAdapters: 1,
        adapters: ['sql', 'chat', 'team,a', 'team'],
        loadMs: 200,
        decodeMsPerStep: 100,
        coldLoadsPerMinute: 6,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 0,
        spanMs: 5066,
        staticAdapters: ['sql,chat'],
        queueTimeoutMs: 4000,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 500,
        prefetch: { intervalMs: 1000, halfLifeMs: 3000, loadsPerMinute: 1, hysteresis: 0.5, evictFactor: 2 },
      },
      [
        { at: 15, kind: 'request', node: 2, adapter: 2, tokens: 3, prompt: 676 },
        { at: 179, kind: 'replica-restart', replica: 0, downMs: 737 },
        { at: 723, kind: 'replica-restart', replica: 0, downMs: 1806 },
        { at: 835, kind: 'partition', node: 2, ms: 4536 },
        { at: 1036, kind: 'slow-path', node: 2, replica: 0, ms: 610, hopMs: 2042 },
        { at: 1441, kind: 'request', node: 0, adapter: -1, tokens: 6, prompt: 602 },
        { at: 1844, kind: 'request', node: 2, adapter: 4, tokens: 3, prompt: 874 },
      ],
    );
  }, 30_000);
});
