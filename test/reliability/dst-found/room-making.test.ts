/**
 * Kept schedules (./holds.ts) for "a request makes room for its load and no more"
 * (docs/reliability.md): make-room unloads, the store's slot counts and lock ends; and a prefetch
 * unloads only for a load it makes.
 */
import { runSchedule } from '../../../dst/run';
import { WORLD, holds } from './holds';

// Found through a request routed on a slow path and still on its way (dst/request-routing.ts `onTheWay`).
describe('requests on their way the simulation found', () => {
  // Seed 501915 (--keep 0,...,16), a false alarm: replica-1 (limit 2) held team; request 10's load
  // of a failed at once (3,097 ms) and node 1 sent the claim's end, which the store ran at 3,099 ms,
  // after node 0's make-room unload of team for team,a (request 12), judged on team + a = 2 of 2.
  // The check took the claim's end at its sending; it now orders claims and grants by the store's
  // scripts (dst/room-making.ts `heldAt`).
  it("seed 501915: a failed load's end the store ran after a make-room grant counted that slot", async () => {
    await holds(
      501915,
      {
        nodes: 3,
        replicas: 2,
        maxLoadedAdapters: 2,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math', 'law'],
        loadMs: 200,
        decodeMsPerStep: 100,
        coldLoadsPerMinute: 1000,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 0,
        spanMs: 2000,
        queueTimeoutMs: 4000,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 500,
      },
      [
        { at: 55, kind: 'slow-path', node: 2, replica: 0, ms: 337, hopMs: 539 },
        { at: 224, kind: 'request', node: 0, adapter: 1, tokens: 1, prompt: 1801 },
        { at: 451, kind: 'request', node: 1, adapter: -1, tokens: 1, prompt: 1693 },
        { at: 603, kind: 'request', node: 1, adapter: 3, tokens: 2, prompt: 1943 },
        { at: 715, kind: 'request', node: 0, adapter: 2, tokens: 28, prompt: 551 },
        { at: 739, kind: 'replica-restart', replica: 0, downMs: 93 },
        { at: 768, kind: 'request', node: 2, adapter: 0, tokens: 2, prompt: 1757 },
        { at: 897, kind: 'request', node: 0, adapter: 6, tokens: 2, prompt: 938 },
        { at: 988, kind: 'flushall' },
        { at: 1040, kind: 'request', node: 1, adapter: 5, tokens: 4, prompt: 1080 },
        { at: 1212, kind: 'request', node: 0, adapter: 7, tokens: 5, prompt: 1746 },
        { at: 1262, kind: 'slow', node: 1, ms: 1154, slowMs: 452 },
        { at: 1289, kind: 'request', node: 2, adapter: 4, tokens: 6, prompt: 800 },
        { at: 1450, kind: 'request', node: 1, adapter: 4, tokens: 2, prompt: 640 },
        { at: 1683, kind: 'load-fail', replica: 1, count: 3, failure: 'rank' },
        { at: 1731, kind: 'request', node: 2, adapter: 6, tokens: 5, prompt: 1099 },
        { at: 1981, kind: 'request', node: 0, adapter: 2, tokens: 1, prompt: 907 },
      ],
    );
  }, 30_000);
  // Seed 500849 (all 16 actions), the same as 501915 on one node: request 7's load of a failed at
  // 5,545 ms; node 0's claim end ran at 5,547 ms, after its own request 12's unload of med for team
  // (sent 5,546 ms, run at once). The model let two calls of one link pass each other (a trip each);
  // it keeps each link's order now, and the schedule runs otherwise (dst-redis-model.test.ts).
  it("seed 500849: a claim's end run after a grant on the same link", async () => {
    await holds(
      500849,
      {
        nodes: 3,
        replicas: 2,
        maxLoadedAdapters: 2,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math', 'law', 'med', 'fin', 'bio', 'geo'],
        loadMs: 200,
        decodeMsPerStep: 100,
        coldLoadsPerMinute: 6,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 1000,
        spanMs: 2000,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 2000,
      },
      [
        { at: 117, kind: 'request', node: 2, adapter: 2, tokens: 2, prompt: 1553 },
        { at: 209, kind: 'request', node: 0, adapter: 7, tokens: 1, prompt: 1902 },
        { at: 464, kind: 'request', node: 0, adapter: 10, tokens: 2, prompt: 343 },
        { at: 518, kind: 'request', node: 0, adapter: 9, tokens: 5, prompt: 381 },
        { at: 550, kind: 'request', node: 2, adapter: 9, tokens: 4, prompt: 755 },
        { at: 709, kind: 'request', node: 1, adapter: 7, tokens: 4, prompt: 1814 },
        { at: 736, kind: 'request', node: 0, adapter: 4, tokens: 6, prompt: 1653 },
        { at: 935, kind: 'request', node: 2, adapter: 8, tokens: 3, prompt: 966 },
        { at: 1183, kind: 'load-fail', replica: 1, count: 2, failure: 'not-found' },
        { at: 1250, kind: 'request', node: 0, adapter: 11, tokens: 3, prompt: 1110 },
        { at: 1529, kind: 'request', node: 2, adapter: 2, tokens: 3, prompt: 915 },
        { at: 1699, kind: 'request', node: 0, adapter: 4, tokens: 2, prompt: 1141 },
        { at: 1836, kind: 'partition', node: 0, ms: 467 },
        { at: 1860, kind: 'request', node: 0, adapter: 3, tokens: 2, prompt: 132 },
        { at: 1942, kind: 'request', node: 0, adapter: 11, tokens: 6, prompt: 1446 },
        { at: 1981, kind: 'request', node: 0, adapter: 8, tokens: 6, prompt: 464 },
      ],
    );
  }, 30_000);
  // Seed 640336 (--keep 0,1,2,3,4,5,6,12,13), a false alarm: request 5 unloaded math on replica-1
  // for sql and its process restarted (710 ms) before it ended the unload's lock; the store counted
  // math unloading, sql's room, until it found node 0 silent. A grant on that count left 0 of 2; the
  // check now counts a room while the store held its unload's lock. Kept as shrunk: on main it broke
  // at request 8's unload of team for fin (granted at 1,521 ms), with the new check alone it holds.
  it("seed 640336: the room of a dead process's make-room unload counts while the store holds its lock", async () => {
    await holds(
      640336,
      {
        nodes: 3,
        replicas: 2,
        maxLoadedAdapters: 2,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math', 'law', 'med', 'fin'],
        loadMs: 200,
        decodeMsPerStep: 50,
        coldLoadsPerMinute: 1000,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 0,
        spanMs: 2000,
        staticAdapters: ['sql,chat'],
        queueTimeoutMs: 4000,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 2000,
      },
      [
        { at: 125, kind: 'request', node: 2, adapter: 8, tokens: 23, prompt: 1894 },
        { at: 152, kind: 'request', node: 0, adapter: 6, tokens: 3, prompt: 747 },
        { at: 344, kind: 'request', node: 0, adapter: 1, tokens: 2, prompt: 963 },
        { at: 516, kind: 'request', node: 2, adapter: 3, tokens: 1, prompt: 959 },
        { at: 693, kind: 'request', node: 0, adapter: 0, tokens: 3, prompt: 379 },
        { at: 705, kind: 'request', node: 2, adapter: 0, tokens: 6, prompt: 1943 },
        { at: 710, kind: 'process-restart', node: 0 },
        { at: 1399, kind: 'request', node: 1, adapter: 6, tokens: 1, prompt: 1129 },
        { at: 1513, kind: 'request', node: 0, adapter: 9, tokens: 6, prompt: 1884 },
      ],
    );
  }, 30_000);
  // Seed 708211 (--keep 0,...,25), a break: replica-1 (limit 4) held bio, a, med; code's load
  // failed and its end ran at 5,068 ms, just before request 18's make-room unload of bio for team:
  // the store granted it on 3 of 4, a slot left empty. Both stores now refuse an unload while a slot
  // is free that no room made for another adapter holds (test/core/fleet-store.test.ts). As shrunk,
  // request 16 (granted at 5,071 ms); it breaks with the new check and the old stores.
  it('seed 708211: no make-room unload while a failed load has given its slot back', async () => {
    await holds(
      708211,
      {
        nodes: 3,
        replicas: 2,
        maxLoadedAdapters: 4,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math', 'law', 'med', 'fin', 'bio'],
        loadMs: 200,
        decodeMsPerStep: 100,
        coldLoadsPerMinute: 1000,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 1000,
        spanMs: 6000,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 2000,
      },
      [
        { at: 150, kind: 'request', node: 1, adapter: 10, tokens: 2, prompt: 851 },
        { at: 337, kind: 'request', node: 2, adapter: 7, tokens: 3, prompt: 1916 },
        { at: 354, kind: 'scrape', replica: 0, ms: 726, mode: 'timeout' },
        { at: 389, kind: 'request', node: 0, adapter: 10, tokens: 6, prompt: 293 },
        { at: 450, kind: 'request', node: 2, adapter: 7, tokens: 6, prompt: 1583 },
        { at: 501, kind: 'replica-restart', replica: 0, downMs: 407 },
        { at: 782, kind: 'request', node: 1, adapter: 0, tokens: 30, prompt: 689 },
        { at: 844, kind: 'request', node: 0, adapter: 8, tokens: 6, prompt: 491 },
        { at: 923, kind: 'request', node: 1, adapter: 2, tokens: 100, prompt: 694 },
        { at: 1194, kind: 'request', node: 2, adapter: 4, tokens: 2, prompt: 1184 },
        { at: 1587, kind: 'request', node: 2, adapter: 0, tokens: 6, prompt: 1557 },
        { at: 1598, kind: 'request', node: 1, adapter: 8, tokens: 4, prompt: 448 },
        { at: 1646, kind: 'load-fail', replica: 1, count: 3, failure: 'engine' },
        { at: 1830, kind: 'request', node: 0, adapter: 9, tokens: 5, prompt: 1395 },
        { at: 4854, kind: 'request', node: 0, adapter: 5, tokens: 5, prompt: 529 },
        { at: 4927, kind: 'request', node: 0, adapter: 9, tokens: 1, prompt: 1212 },
        { at: 4931, kind: 'request', node: 1, adapter: 4, tokens: 1, prompt: 1738 },
        { at: 5050, kind: 'request', node: 0, adapter: 7, tokens: 6, prompt: 1900 },
        { at: 5061, kind: 'request', node: 0, adapter: 3, tokens: 6, prompt: 552 },
        { at: 5478, kind: 'request', node: 1, adapter: 4, tokens: 3, prompt: 170 },
        { at: 5662, kind: 'request', node: 1, adapter: 5, tokens: 5, prompt: 540 },
      ],
    );
  }, 30_000);
  // Seed 848577 (--keep 0,...,15), a break: replica-0 (limit 2) held chat; request 8's load of team,a
  // failed at once, and the store granted request 11's unload of chat for bio on 1 of 2 (fixed as
  // 708211). As shrunk, request 12's unload of team for fin (granted at 2,599 ms), the same way.
  it('seed 848577: no make-room unload on a replica with a slot free', async () => {
    await holds(
      848577,
      {
        nodes: 3,
        replicas: 2,
        maxLoadedAdapters: 2,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math', 'law', 'med', 'fin', 'bio'],
        loadMs: 800,
        decodeMsPerStep: 100,
        coldLoadsPerMinute: 1000,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 1000,
        spanMs: 2000,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 500,
      },
      [
        { at: 110, kind: 'request', node: 2, adapter: 3, tokens: 2, prompt: 585 },
        { at: 124, kind: 'request', node: 1, adapter: 4, tokens: 5, prompt: 1553 },
        { at: 400, kind: 'request', node: 0, adapter: 8, tokens: 2, prompt: 820 },
        { at: 480, kind: 'request', node: 0, adapter: 4, tokens: 5, prompt: 428 },
        { at: 610, kind: 'request', node: 1, adapter: 1, tokens: 5, prompt: 1254 },
        { at: 835, kind: 'request', node: 0, adapter: 1, tokens: 2, prompt: 979 },
        { at: 874, kind: 'request', node: 1, adapter: 2, tokens: 3, prompt: 1144 },
        { at: 980, kind: 'request', node: 2, adapter: -1, tokens: 4, prompt: 1451 },
        { at: 1117, kind: 'load-fail', replica: 0, count: 1, failure: 'rank' },
        { at: 1293, kind: 'request', node: 1, adapter: 0, tokens: 5, prompt: 540 },
        { at: 1301, kind: 'request', node: 1, adapter: 10, tokens: 5, prompt: 1900 },
        { at: 1343, kind: 'request', node: 2, adapter: 3, tokens: 6, prompt: 1191 },
        { at: 1366, kind: 'skew', node: 0, ms: -238 },
        { at: 1464, kind: 'request', node: 1, adapter: 9, tokens: 2, prompt: 658 },
        { at: 1561, kind: 'request', node: 2, adapter: 0, tokens: 3, prompt: 1829 },
      ],
    );
  }, 30_000);
  // Seed 223260 (--keep 0,...,14,20), a break on a build of main before room-grant (8286efe), found
  // by a sweep of a stale dist: replica-1 (limit 2) held math; request 2 (team) read it full while
  // node 1 loaded code there (math + code, 2 of 2); code's load failed and node 1's end ran at
  // 2,568 ms; node 1's unload of math for team, sent 151 ms later on the same link, was granted on
  // 1 of 2 (2,720 ms): 0 of 2, one load to come. No call passed another: with each link in order and
  // the store's free-slot refusal reverted it breaks the same way; the store now refuses it and team
  // loads into the slot.
  it('seed 223260: no make-room unload after a failed load gave its slot back, the link in order', async () => {
    await holds(
      223260,
      {
        nodes: 3,
        replicas: 2,
        maxLoadedAdapters: 2,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math', 'law'],
        loadMs: 200,
        decodeMsPerStep: 100,
        coldLoadsPerMinute: 6,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 0,
        spanMs: 6000,
        staticAdapters: ['sql,chat'],
        queueTimeoutMs: 4000,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 500,
      },
      [
        { at: 233, kind: 'request', node: 1, adapter: 6, tokens: 4, prompt: 701 },
        { at: 308, kind: 'slow', node: 1, ms: 2250, slowMs: 199 },
        { at: 312, kind: 'request', node: 1, adapter: 3, tokens: 4, prompt: 1636 },
        { at: 414, kind: 'request', node: 1, adapter: -1, tokens: 3, prompt: 1421 },
        { at: 458, kind: 'request', node: 0, adapter: 0, tokens: 2, prompt: 381 },
        { at: 461, kind: 'request', node: 2, adapter: 8, tokens: 6, prompt: 1044 },
        { at: 762, kind: 'request', node: 1, adapter: 5, tokens: 2, prompt: 412 },
        { at: 1008, kind: 'request', node: 0, adapter: 2, tokens: 118, prompt: 730 },
        { at: 1040, kind: 'request', node: 2, adapter: 0, tokens: 3, prompt: 1925 },
        { at: 1190, kind: 'request', node: 2, adapter: 6, tokens: 3, prompt: 1671 },
        { at: 1210, kind: 'request', node: 1, adapter: 5, tokens: 6, prompt: 1642 },
        { at: 1351, kind: 'request', node: 1, adapter: 0, tokens: 4, prompt: 1717 },
        { at: 1466, kind: 'replica-outage', replica: 1, ms: 1175, mode: 'error500' },
        { at: 1524, kind: 'request', node: 0, adapter: 3, tokens: 3, prompt: 1720 },
        { at: 1538, kind: 'request', node: 0, adapter: 3, tokens: 5, prompt: 952 },
        { at: 5357, kind: 'request', node: 1, adapter: 0, tokens: 5, prompt: 1013 },
      ],
    );
  }, 30_000);
  // Seed 885877 (--keep 0,1,2,3,4,5,6,7,9,10,11,14,15), a false alarm: node 2's link was slowed
  // (replies 1,744 ms late, past the 500 ms timeout) as it asked for sql's slot on replica-0 (chat
  // loaded, 1 of 2). The store granted it (861 ms), the call timed out, the node loaded alone (the
  // load failed) and never ended a lock it knew nothing of: the store counted sql loading until
  // the lock's TTL (8,861 ms). Request 8 for med read chat + sql = 2 of 2 and unloaded chat (granted
  // at 6,106 ms): 0 of 2. The check now records a slot the store granted whose answer was lost.
  it('seed 885877: a load slot the store granted whose answer a slowed link lost counts until its TTL', async () => {
    await holds(
      885877,
      {
        nodes: 3,
        replicas: 2,
        maxLoadedAdapters: 2,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math', 'law', 'med'],
        loadMs: 200,
        decodeMsPerStep: 100,
        coldLoadsPerMinute: 6,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 1000,
        spanMs: 2000,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 2000,
      },
      [
        { at: 52, kind: 'request', node: 0, adapter: 1, tokens: 4, prompt: 1448 },
        { at: 220, kind: 'request', node: 2, adapter: 6, tokens: 2, prompt: 1597 },
        { at: 263, kind: 'request', node: 1, adapter: 1, tokens: 6, prompt: 1984 },
        { at: 550, kind: 'load-fail', replica: 0, count: 3, failure: 'rank' },
        { at: 586, kind: 'request', node: 2, adapter: 6, tokens: 4, prompt: 922 },
        { at: 700, kind: 'request', node: 1, adapter: 7, tokens: 3, prompt: 1342 },
        { at: 853, kind: 'request', node: 2, adapter: 0, tokens: 3, prompt: 1444 },
        { at: 859, kind: 'slow', node: 2, ms: 598, slowMs: 1744 },
        { at: 977, kind: 'request', node: 2, adapter: 6, tokens: 6, prompt: 1851 },
        { at: 1047, kind: 'scrape', replica: 0, ms: 3713, mode: 'garbled' },
        { at: 1135, kind: 'request', node: 0, adapter: 8, tokens: 5, prompt: 1862 },
        { at: 1910, kind: 'replica-outage', replica: 1, ms: 1712, mode: 'hang' },
        { at: 1980, kind: 'request', node: 1, adapter: 7, tokens: 1, prompt: 593 },
      ],
    );
  }, 30_000);
});

describe('schedules the simulation found', () => {
  // Seed 202113 (a crowd and SLO classes; --keep 0,1,6-12,14-58): replica-0 restarts at 1,525 ms,
  // forgetting fin and med. Node 0's make-room unload of fin for sql, granted at 3,043 ms, holds its
  // lock while node 0's slowed path keeps the replica's word from coming (ended not done at 4,045
  // ms, never sent), so the first poll since the restart (applied at 3,133 ms) leaves fin
  // `unloading`. At 3,680 ms the store counts fin (its slot sql's room) and law, and grants
  // request 18 law's unload for geo: the replica, holding law alone, is left empty. Allowed (the
  // store counts what a restart forgot until a poll reads it, docs/reliability.md); the check took
  // the first poll after the restart for that one, though it leaves an adapter under a lock as it is.
  it("seed 202113: a restart's loss read by no poll while the forgotten adapter's unload lock held it", async () => {
    await holds(
      202113,
      {
        nodes: 3,
        replicas: 2,
        maxLoadedAdapters: 2,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math', 'law', 'med', 'fin', 'bio', 'geo'],
        loadMs: 200,
        decodeMsPerStep: 50,
        coldLoadsPerMinute: 1000,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 1000,
        spanMs: 7334,
        queueTimeoutMs: 2000,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 2000,
        maxNumSeqs: 4,
        sloClasses: [
          { name: 'interactive', ttft_ms: 1000, priority: 0 },
          { name: 'batch', ttft_ms: 2500, priority: -1 },
        ],
      },
      [
        { at: 101, kind: 'request', node: 2, adapter: 4, tokens: 2, prompt: 246, cls: 'interactive' },
        { at: 137, kind: 'request', node: 2, adapter: 9, tokens: 3, prompt: 1595, cls: 'interactive' },
        { at: 838, kind: 'request', node: 1, adapter: 2, tokens: 3, prompt: 1384, cls: 'batch' },
        { at: 839, kind: 'request', node: 1, adapter: 4, tokens: 3, prompt: 1396, cls: 'batch' },
        { at: 841, kind: 'request', node: 1, adapter: 0, tokens: 2, prompt: 411, cls: 'interactive' },
        { at: 841, kind: 'request', node: 1, adapter: 8, tokens: 1, prompt: 274, cls: 'batch' },
        { at: 842, kind: 'flushall' },
        { at: 842, kind: 'slow-path', node: 1, replica: 1, ms: 685, hopMs: 2112 },
        { at: 900, kind: 'request', node: 1, adapter: 7, tokens: 3, prompt: 206, cls: 'interactive' },
        { at: 985, kind: 'request', node: 1, adapter: 8, tokens: 2, prompt: 1841, cls: 'batch' },
        { at: 989, kind: 'request', node: 1, adapter: 4, tokens: 4, prompt: 132, cls: 'interactive' },
        { at: 1157, kind: 'request', node: 1, adapter: 0, tokens: 6, prompt: 1847 },
        { at: 1422, kind: 'slow-path', node: 0, replica: 0, ms: 2847, hopMs: 1094 },
        { at: 1525, kind: 'replica-restart', replica: 0, downMs: 1183 },
        { at: 1578, kind: 'request', node: 0, adapter: 4, tokens: 2, prompt: 182, cls: 'batch' },
        { at: 1694, kind: 'request', node: 2, adapter: 3, tokens: 6, prompt: 1308 },
        { at: 1731, kind: 'request', node: 0, adapter: 2, tokens: 6, prompt: 85, cls: 'interactive' },
        { at: 1751, kind: 'request', node: 0, adapter: 0, tokens: 60, prompt: 936, cls: 'batch' },
        { at: 2955, kind: 'request', node: 0, adapter: 5, tokens: 4, prompt: 1157 },
        { at: 3218, kind: 'request', node: 2, adapter: 7, tokens: 2, prompt: 416, cls: 'batch' },
        { at: 3503, kind: 'request', node: 1, adapter: 9, tokens: 22, prompt: 1528 },
        { at: 3666, kind: 'request', node: 2, adapter: 11, tokens: 1, prompt: 1049, cls: 'batch' },
        { at: 3890, kind: 'request', node: 0, adapter: 5, tokens: 5, prompt: 942, cls: 'interactive' },
        { at: 3904, kind: 'request', node: 1, adapter: 0, tokens: 30, prompt: 1701, cls: 'batch' },
        { at: 4046, kind: 'request', node: 1, adapter: 9, tokens: 56, prompt: 1769, cls: 'batch' },
        { at: 4082, kind: 'request', node: 0, adapter: 7, tokens: 1, prompt: 1171, cls: 'batch' },
        { at: 4219, kind: 'request', node: 2, adapter: 7, tokens: 1, prompt: 402 },
        { at: 4332, kind: 'request', node: 1, adapter: 3, tokens: 21, prompt: 1415, cls: 'interactive' },
        { at: 4470, kind: 'request', node: 1, adapter: 0, tokens: 33, prompt: 1234, cls: 'batch' },
        { at: 4553, kind: 'request', node: 1, adapter: -1, tokens: 58, prompt: 1039, cls: 'interactive' },
        { at: 4594, kind: 'request', node: 1, adapter: 3, tokens: 22, prompt: 1636, cls: 'interactive' },
        { at: 4598, kind: 'request', node: 1, adapter: 0, tokens: 33, prompt: 1844, cls: 'batch' },
        { at: 4681, kind: 'request', node: 1, adapter: 9, tokens: 29, prompt: 1929, cls: 'interactive' },
        { at: 4846, kind: 'request', node: 1, adapter: -1, tokens: 20, prompt: 1220, cls: 'interactive' },
        { at: 5086, kind: 'request', node: 1, adapter: 3, tokens: 20, prompt: 1719, cls: 'batch' },
        { at: 5100, kind: 'request', node: 1, adapter: 0, tokens: 45, prompt: 1821, cls: 'interactive' },
        { at: 5632, kind: 'request', node: 1, adapter: 0, tokens: 39, prompt: 1900, cls: 'interactive' },
        { at: 5718, kind: 'request', node: 1, adapter: 9, tokens: 25, prompt: 1665, cls: 'batch' },
        { at: 5821, kind: 'request', node: 1, adapter: 3, tokens: 32, prompt: 1936, cls: 'interactive' },
        { at: 5971, kind: 'request', node: 1, adapter: -1, tokens: 60, prompt: 1556, cls: 'batch' },
        { at: 6124, kind: 'request', node: 1, adapter: 0, tokens: 40, prompt: 1472, cls: 'batch' },
        { at: 6170, kind: 'request', node: 1, adapter: 3, tokens: 22, prompt: 1614, cls: 'batch' },
        { at: 6213, kind: 'request', node: 1, adapter: 3, tokens: 43, prompt: 1052, cls: 'batch' },
        { at: 6223, kind: 'request', node: 1, adapter: 9, tokens: 24, prompt: 1461 },
        { at: 6236, kind: 'request', node: 1, adapter: -1, tokens: 40, prompt: 1959, cls: 'batch' },
        { at: 6260, kind: 'request', node: 1, adapter: -1, tokens: 46, prompt: 1939, cls: 'interactive' },
        { at: 6310, kind: 'request', node: 1, adapter: 9, tokens: 38, prompt: 1376, cls: 'interactive' },
        { at: 6883, kind: 'request', node: 1, adapter: -1, tokens: 33, prompt: 1920, cls: 'interactive' },
        { at: 6949, kind: 'request', node: 1, adapter: 0, tokens: 39, prompt: 1280, cls: 'interactive' },
        { at: 7021, kind: 'request', node: 1, adapter: 3, tokens: 36, prompt: 1360, cls: 'interactive' },
        { at: 7107, kind: 'request', node: 1, adapter: 3, tokens: 28, prompt: 1837, cls: 'interactive' },
        { at: 7133, kind: 'request', node: 1, adapter: -1, tokens: 41, prompt: 1051, cls: 'interactive' },
        { at: 7195, kind: 'request', node: 1, adapter: 3, tokens: 54, prompt: 1238, cls: 'interactive' },
        { at: 7283, kind: 'request', node: 1, adapter: 9, tokens: 40, prompt: 1113 },
      ],
    );
  }, 30_000);
});

describe('a request makes room for its load and no more: a lock end a retired runtime made alone', () => {
  // Seed 662665 (--keep 0,1,2,3,4,5,6,7): a same-state record change (377 ms) retires node 1's runtime
  // while its request for `bio` is granted replica-1's load slot (758 ms); a Sentinel switch that loses
  // nothing (805 ms) cuts the old runtime off, so it decides alone, and the replica fails the load
  // (960 ms). The old runtime recorded the lock's end but only locally, and closed: Redis kept `bio`
  // `loading` beside `team,a` until the lock's TTL, and node 0's request for `law` unloaded `team,a` to
  // make room on a replica holding nothing else. Two fixes: the successor adopts and sends the old
  // runtime's lock ends (failover-store.ts `adopt`), and the model keeps, across a switch, the locks
  // the promoted replica still holds (it ended them all, so the check counted `bio` as gone).
  it('seed 662665: the lock ends a retired runtime made alone are sent by its successor; a switch keeps the locks it keeps', async () => {
    await holds(
      662665,
      {
        nodes: 3,
        replicas: 2,
        maxLoadedAdapters: 2,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math', 'law', 'med', 'fin', 'bio', 'geo'],
        loadMs: 200,
        decodeMsPerStep: 100,
        coldLoadsPerMinute: 1000,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 0,
        spanMs: 2000,
        queueTimeoutMs: 4000,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 500,
      },
      [
        { at: 32, kind: 'request', node: 1, adapter: 2, tokens: 6, prompt: 1083 },
        { at: 318, kind: 'request', node: 1, adapter: 3, tokens: 1, prompt: 171 },
        { at: 377, kind: 'record-change', otherState: false, gapMs: 447 },
        { at: 405, kind: 'load-fail', replica: 1, count: 1, failure: 'engine' },
        { at: 490, kind: 'request', node: 0, adapter: 11, tokens: 5, prompt: 484 },
        { at: 747, kind: 'request', node: 1, adapter: 10, tokens: 1, prompt: 680 },
        { at: 805, kind: 'switch', lost: 0 },
        { at: 977, kind: 'request', node: 0, adapter: 7, tokens: 1, prompt: 1134 },
      ],
    );
  }, 30_000);
});

describe('a prefetch unloads an idle adapter only for a load it makes', () => {
  // Seed 60 (--keep 1,2; prefetch drawn, branch dst-prefetch): cold_loads_per_minute 3, so
  // prefetching may start no load at all (a quarter of 3 a minute, rounded down). Requests for
  // team and team,a on one-slot replicas; node 0's tick plans team,a on replica-1 in place of the
  // idle, colder team (evict factor 1). The manager unloaded team to make room (Room.claimSlot
  // makes room before it asks the budget: a request keeps the room it made), then the budget
  // refused the load: team gone, the slot left empty. The fix: a prefetch with a victim takes its
  // budget unit before the manager makes room (src/prefetch/prefetcher.ts), so a refused load
  // unloads nothing.
  it('seed 60: a prefetch with no budget left unloads no victim', async () => {
    const r = await runSchedule({
      seed: 60,
      world: {
        ...WORLD,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math'],
        loadMs: 800,
        coldLoadsPerMinute: 3,
        spanMs: 2000,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 2000,
        prefetch: { intervalMs: 500, halfLifeMs: 1000, loadsPerMinute: 1, hysteresis: 1, evictFactor: 1 },
      },
      actions: [
        { at: 645, kind: 'request', node: 2, adapter: 3, tokens: 1, prompt: 340 },
        { at: 1112, kind: 'request', node: 0, adapter: 2, tokens: 6, prompt: 1364 },
      ],
    });
    expect(r.prefetch?.unloads).toBe(0);
    expect(r.violation?.detail).toBeUndefined();
  });
});

describe('a request makes room for its load and no more: a slot granted, its answer on its way', () => {
  // Seed 2223196 (the whole schedule: dropping even the actions after 2,018 ms changes the draws and it
  // holds). Request 27 (team,a, node 0) waits for room on replica-1 (math, law: full) and is granted
  // math's unload at 2,002 ms (unloaded at 2,007). Node 1's request for chat, waiting for room there
  // too, reads the freed slot at 2,016 and the store grants its load at 2,017, just before request
  // 27's beginLoad (refused); request 27 reads law and chat loading (full) and is granted law's unload
  // at 2,017: docs/reliability.md "Whatever fills the replica takes the room (another load ...)" and
  // FleetStore.beginUnload "a replica filled by another load ... lets the next unload for it go". Chat's
  // slot fills the replica, but its grant's answer had not reached node 1 when law's unload answered
  // (2,018), and the check recorded a slot only at its answer: "left 0 loaded, 0 loading and 1
  // adapter(s) being made room for". Not a bug in src/: the check now records a slot when the store
  // grants it (RedisLink.grantRan).
  it('seed 2223196: a slot granted whose answer is still on its way fills the room', async () => {
    await holds(
      2223196,
      {
        nodes: 3,
        replicas: 3,
        maxLoadedAdapters: 2,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math', 'law'],
        loadMs: 200,
        decodeMsPerStep: 100,
        coldLoadsPerMinute: 1000,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 1000,
        spanMs: 3942,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 500,
        queueTimeoutMs: 2000,
        maxNumSeqs: 4,
        prefetch: { intervalMs: 2000, halfLifeMs: 3000, loadsPerMinute: 4, hysteresis: 1, evictFactor: 2 },
      },
      [
        { at: 122, kind: 'request', node: 1, adapter: 1, tokens: 24, prompt: 1485 },
        { at: 191, kind: 'request', node: 1, adapter: 3, tokens: 5, prompt: 1108 },
        { at: 206, kind: 'request', node: 1, adapter: 6, tokens: 6, prompt: 1597 },
        { at: 210, kind: 'request', node: 1, adapter: 6, tokens: 1, prompt: 337 },
        { at: 250, kind: 'request', node: 1, adapter: 0, tokens: 50, prompt: 1738 },
        { at: 298, kind: 'request', node: 1, adapter: -1, tokens: 22, prompt: 1947 },
        { at: 448, kind: 'scrape', replica: 2, ms: 229, mode: 'truncated' },
        { at: 465, kind: 'request', node: 1, adapter: 0, tokens: 55, prompt: 1131 },
        { at: 470, kind: 'slow-path', node: 0, replica: 2, ms: 486, hopMs: 1984 },
        { at: 517, kind: 'request', node: 1, adapter: -1, tokens: 25, prompt: 1892 },
        { at: 560, kind: 'request', node: 1, adapter: 1, tokens: 25, prompt: 1207 },
        { at: 567, kind: 'request', node: 1, adapter: 0, tokens: 2, prompt: 1262 },
        { at: 575, kind: 'request', node: 1, adapter: 0, tokens: 46, prompt: 1079 },
        { at: 709, kind: 'request', node: 1, adapter: -1, tokens: 54, prompt: 1472 },
        { at: 714, kind: 'request', node: 1, adapter: 0, tokens: 27, prompt: 1494 },
        { at: 718, kind: 'request', node: 2, adapter: 3, tokens: 3, prompt: 730 },
        { at: 778, kind: 'request', node: 0, adapter: 3, tokens: 4, prompt: 1255 },
        { at: 940, kind: 'request', node: 1, adapter: 1, tokens: 1, prompt: 867 },
        { at: 963, kind: 'request', node: 1, adapter: -1, tokens: 51, prompt: 1274 },
        { at: 964, kind: 'request', node: 1, adapter: 0, tokens: 30, prompt: 1900 },
        { at: 1019, kind: 'request', node: 1, adapter: 3, tokens: 3, prompt: 1667 },
        { at: 1024, kind: 'request', node: 1, adapter: 0, tokens: 44, prompt: 1559 },
        { at: 1024, kind: 'request', node: 1, adapter: -1, tokens: 47, prompt: 1300 },
        { at: 1027, kind: 'request', node: 0, adapter: 7, tokens: 6, prompt: 1120 },
        { at: 1143, kind: 'request', node: 0, adapter: 5, tokens: 5, prompt: 1141 },
        { at: 1183, kind: 'request', node: 1, adapter: 1, tokens: 20, prompt: 1753 },
        { at: 1210, kind: 'request', node: 1, adapter: 1, tokens: 57, prompt: 1727 },
        { at: 1221, kind: 'request', node: 2, adapter: 7, tokens: 1, prompt: 1927 },
        { at: 1243, kind: 'request', node: 0, adapter: 2, tokens: 2, prompt: 870 },
        { at: 1258, kind: 'request', node: 1, adapter: -1, tokens: 48, prompt: 1979 },
        { at: 1310, kind: 'request', node: 1, adapter: 3, tokens: 6, prompt: 653 },
        { at: 1524, kind: 'request', node: 1, adapter: 3, tokens: 2, prompt: 752 },
        { at: 1549, kind: 'request', node: 1, adapter: 1, tokens: 33, prompt: 1737 },
        { at: 1565, kind: 'request', node: 1, adapter: 0, tokens: 41, prompt: 1659 },
        { at: 1585, kind: 'request', node: 1, adapter: 1, tokens: 29, prompt: 1912 },
        { at: 1604, kind: 'request', node: 1, adapter: 1, tokens: 58, prompt: 1709 },
        { at: 1747, kind: 'request', node: 0, adapter: 1, tokens: 6, prompt: 1227 },
        { at: 1957, kind: 'request', node: 1, adapter: 0, tokens: 29, prompt: 1554 },
        { at: 1980, kind: 'request', node: 1, adapter: -1, tokens: 48, prompt: 1747 },
        { at: 1985, kind: 'request', node: 1, adapter: 1, tokens: 27, prompt: 1317 },
        { at: 2011, kind: 'request', node: 1, adapter: 0, tokens: 43, prompt: 1491 },
        { at: 2180, kind: 'request', node: 1, adapter: 0, tokens: 23, prompt: 1934 },
        { at: 2366, kind: 'request', node: 1, adapter: 0, tokens: 31, prompt: 1517 },
        { at: 2447, kind: 'request', node: 1, adapter: -1, tokens: 37, prompt: 1111 },
        { at: 2504, kind: 'request', node: 1, adapter: 0, tokens: 36, prompt: 1445 },
        { at: 2553, kind: 'request', node: 1, adapter: -1, tokens: 33, prompt: 1442 },
        { at: 2657, kind: 'request', node: 1, adapter: 0, tokens: 54, prompt: 1463 },
        { at: 2680, kind: 'request', node: 1, adapter: 0, tokens: 46, prompt: 1664 },
        { at: 2733, kind: 'request', node: 1, adapter: 0, tokens: 34, prompt: 1698 },
        { at: 2900, kind: 'request', node: 1, adapter: 0, tokens: 49, prompt: 1816 },
        { at: 2973, kind: 'request', node: 1, adapter: -1, tokens: 35, prompt: 1076 },
        { at: 3011, kind: 'request', node: 1, adapter: 1, tokens: 34, prompt: 1152 },
        { at: 3049, kind: 'request', node: 1, adapter: -1, tokens: 32, prompt: 1884 },
        { at: 3122, kind: 'request', node: 1, adapter: 1, tokens: 29, prompt: 1530 },
        { at: 3472, kind: 'request', node: 1, adapter: 0, tokens: 49, prompt: 1173 },
        { at: 3479, kind: 'request', node: 1, adapter: 0, tokens: 60, prompt: 1287 },
        { at: 3719, kind: 'request', node: 1, adapter: 0, tokens: 56, prompt: 1596 },
        { at: 3754, kind: 'request', node: 1, adapter: -1, tokens: 37, prompt: 1575 },
        { at: 3759, kind: 'request', node: 1, adapter: 1, tokens: 22, prompt: 1883 },
      ],
    );
  }, 30_000);
});
