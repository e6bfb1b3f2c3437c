/**
 * Kept schedules (./holds.ts) for "a hold never waits with nothing that could change", "a request is
 * sent or refused within its access bound" and "every request answered" (docs/reliability.md).
 */
import { runSchedule } from '../../../dst/run';
import type { Schedule } from '../../../dst/schedule';
import { WORLD, holds } from './holds';

describe('schedules the simulation found', () => {
  // Issue 31 item 1c, found with the fix reverted (the hold counted the request's own load as
  // wait): seed 288 (--keep 5). One request for a cold adapter on an idle fleet whose loads take
  // 1.5 s against a 1 s objective was held for the whole hold window (`chat alone on an idle
  // fleet routed after 8533 ms`); now it goes at once and its load starts.
  it('seed 288 (issue 31 item 1c): a cold request alone on an idle fleet is not held', async () => {
    const r = await runSchedule({
      seed: 288,
      world: {
        ...WORLD,
        replicas: 2,
        maxLoadedAdapters: 2,
        adapters: ['sql', 'chat', 'team,a', 'team'],
        decodeMsPerStep: 50,
        staticAdapters: ['sql,chat'],
      },
      actions: [{ at: 5642, kind: 'request', node: 2, adapter: 1, tokens: 6, prompt: 1765 }],
    });
    expect(r.violation).toBeUndefined();
  }, 30_000);
  // Seed 1002201 (--keep 3,6,7,8,9,12,13,15): node 1 loaded `chat` on replica-0 (finishLoad at
  // 1397 ms); a Sentinel switch at 1423 ms lost the last writes, that end among them, so the new
  // primary said `chat` was loading there until the lock's TTL. Node 2's request for `chat`, alone
  // on an idle fleet from 1805 ms, waited for that load twice and got a 503 after 7,032 ms. A node
  // now sends again, once it finds the server changed, the ends of its locks that may be lost.
  it('seed 1002201: a load whose end a Sentinel switch lost is ended again on the new primary', async () => {
    await holds(
      1002201,
      {
        ...WORLD,
        adapters: WORLD.adapters.slice(0, 4),
        maxLoadedAdapters: 4,
        loadMs: 200,
        decodeMsPerStep: 50,
        coldLoadsPerMinute: 6,
        ttftSloMs: 0,
        spanMs: 2000,
        queueTimeoutMs: 4000,
        upstreamTimeoutMs: 5000,
      },
      [
        { at: 445, kind: 'request', node: 0, adapter: -1, tokens: 1, prompt: 755 },
        { at: 889, kind: 'request', node: 1, adapter: 2, tokens: 4, prompt: 756 },
        { at: 962, kind: 'request', node: 1, adapter: -1, tokens: 4, prompt: 648 },
        { at: 973, kind: 'request', node: 1, adapter: 3, tokens: 5, prompt: 1347 },
        { at: 988, kind: 'request', node: 1, adapter: 1, tokens: 2, prompt: 322 },
        { at: 1283, kind: 'request', node: 0, adapter: 0, tokens: 2, prompt: 1929 },
        { at: 1423, kind: 'switch', lost: 5 },
        { at: 1805, kind: 'request', node: 2, adapter: 1, tokens: 5, prompt: 1522 },
      ],
    );
  }, 30_000);
  // Issue 31 item 1d (a wait ended by its fallback left its wake-up behind), found with the fix
  // reverted: seed 12 (--keep 6,7,10,11,12,15). Node 2's requests wait for room on one-slot
  // replicas (a slow load, Redis restarted empty for 69 ms), each fallback leaving a wake-up in the
  // room signal (`node 2: 12 wake-ups left with 3 requests routing`).
  it('seed 12 (issue 31 item 1d): a wait ended by its fallback leaves no wake-up behind', async () => {
    await holds(
      12,
      {
        ...WORLD,
        replicas: 2,
        adapters: WORLD.adapters.slice(0, 8),
        loadMs: 800,
        coldLoadsPerMinute: 6,
        spanMs: 2000,
        staticAdapters: ['sql,chat'],
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 500,
      },
      [
        { at: 988, kind: 'request', node: 2, adapter: 1, tokens: 2, prompt: 1679 },
        { at: 1299, kind: 'slow-load', replica: 1, ms: 1437, slowMs: 3978 },
        { at: 1462, kind: 'redis-restart', empty: true, downMs: 69 },
        { at: 1481, kind: 'request', node: 2, adapter: 3, tokens: 4, prompt: 404 },
        { at: 1639, kind: 'request', node: 2, adapter: 5, tokens: 4, prompt: 145 },
        { at: 1970, kind: 'request', node: 2, adapter: 0, tokens: 1, prompt: 147 },
      ],
    );
  }, 30_000);
  // Seed 16974 (--keep 0,1,8,14,15): a `redis` record change to other state pushed to the nodes 1,189 ms
  // apart (node 2 at 2,412 ms); Redis restarted from its snapshot at 1,750 ms. Node 2's request for `sql` came
  // at 1,811 ms, before its push, and waited on its old runtime for room on replica-0 (`team` idle there):
  // refused while node 2 decided alone, then, the runtime retired to other state, by the runtime itself
  // (its successor may admit a request at once) while the successor unloads nothing until that decision
  // ends. A 503 after 8 s. The hold's check took it for a request with nothing that could change.
  it('seed 16974: a request that came before its node took a record change is no idle hold', async () => {
    await holds(
      16974,
      {
        ...WORLD,
        adapters: WORLD.adapters.slice(0, 4),
        loadMs: 200,
        decodeMsPerStep: 50,
        coldLoadsPerMinute: 3,
        spanMs: 2000,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 2000,
      },
      [
        { at: 34, kind: 'record-change', otherState: true, gapMs: 1189 },
        { at: 411, kind: 'request', node: 0, adapter: 1, tokens: 6, prompt: 1126 },
        { at: 1055, kind: 'request', node: 0, adapter: 3, tokens: 4, prompt: 481 },
        { at: 1750, kind: 'redis-restart', empty: false, downMs: 5 },
        { at: 1811, kind: 'request', node: 2, adapter: 0, tokens: 4, prompt: 374 },
      ],
    );
  }, 30_000);
});

describe('a hold never waits with nothing that could change: a node back from an outage during a FLUSHALL', () => {
  // Seed 264535 (--keep 0,1,2,8,9,12,13,15): a partition of every node (430-684 ms) left node 0
  // deciding alone from 1,045 ms (a release sent into it timed out), and a FLUSHALL at 1,554 ms
  // emptied Redis meanwhile. Node 0's probe took its state back at 2,065 ms, its registration
  // reading the new epoch, and it held off its unloads from then; but the "state lost" note that
  // registration left was taken only by a views call at 2,945 ms, which took the state back again
  // and held unloads off anew until 4,945 ms. Node 0's request for `code` (1,884 ms), alone on an
  // idle fleet, waited for room on replica-1 (`chat` and `a` idle) until 5,087 ms: routed after
  // 3,429 ms, past the bound of 3,400.
  it('seed 264535: a node back from an outage during a FLUSHALL holds off its unloads once', async () => {
    await holds(
      264535,
      {
        ...WORLD,
        maxLoadedAdapters: 2,
        adapters: WORLD.adapters.slice(0, 7),
        loadMs: 200,
        decodeMsPerStep: 50,
        coldLoadsPerMinute: 6,
        spanMs: 2000,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 2000,
      },
      [
        { at: 51, kind: 'request', node: 2, adapter: 1, tokens: 4, prompt: 1553 },
        { at: 160, kind: 'request', node: 0, adapter: 2, tokens: 3, prompt: 234 },
        { at: 430, kind: 'partition', node: -1, ms: 254 },
        { at: 1174, kind: 'request', node: 1, adapter: -1, tokens: 1, prompt: 1304 },
        { at: 1220, kind: 'replica-restart', replica: 0, downMs: 3 },
        { at: 1327, kind: 'request', node: 1, adapter: 4, tokens: 2, prompt: 1349 },
        { at: 1554, kind: 'flushall' },
        { at: 1884, kind: 'request', node: 0, adapter: 5, tokens: 3, prompt: 1257 },
      ],
    );
  }, 30_000);
});

describe('a hold never waits with nothing that could change: a decision whose calls crossed a slow path', () => {
  // Seed 536271 (--keep 1,2,3,15,16): node 1's path to replica-1 slow from 1,741 ms for 1,331 ms, 1,829 ms
  // each way. Node 1's request for `law` (1,989 ms), alone on an idle fleet, read replica-1's registry
  // before its load (timed out at 1,000 ms) and sent the load at 3,005 ms, before the path healed: the
  // call timed out at 3,000 ms, the registry then listed `law` and the request routed after 4,021 ms, past
  // the bound of 3,400. The router waited on nothing but the slow path's round trips.
  it('seed 536271: the time a decision waits on a slow path is not held against it', async () => {
    await holds(
      536271,
      {
        nodes: 3,
        replicas: 2,
        maxLoadedAdapters: 4,
        adapters: WORLD.adapters.slice(0, 10),
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
        { at: 108, kind: 'request', node: 0, adapter: 0, tokens: 5, prompt: 1435 },
        { at: 145, kind: 'partition', node: -1, ms: 1294 },
        { at: 258, kind: 'request', node: 1, adapter: 6, tokens: 5, prompt: 1095 },
        { at: 1741, kind: 'slow-path', node: 1, replica: 1, ms: 1331, hopMs: 1829 },
        { at: 1989, kind: 'request', node: 1, adapter: 7, tokens: 6, prompt: 305 },
      ],
    );
  }, 30_000);
});

describe('a hold never waits with nothing that could change: room made for an adapter another load took', () => {
  // Seed 437527 (all 16 actions; it does not shrink): at 881 ms node 1 unloads idle `med` on replica-2
  // (limit 1) to make room for `a`, and the store keeps that room for `a` until `a`'s load begins (one
  // unload per load) or the unload's TTL passes (~10 s). The fleet's cold-load budget (6) then refuses
  // node 1's request (429), and node 0's request for `team`, waiting for room there, loads into the slot.
  // Node 2's request for `a` at 1,844 ms, alone on an idle fleet, finds replica-2 full with `team` idle;
  // every unload of `team` for `a` was refused by the room kept for `a`, which no longer existed, until
  // its queue_timeout_ms: a 503 after 8,126 ms. A room made for `a` now refuses an unload only while the
  // replica has a free slot by the caller's limit: `team` filled it, so the unload goes.
  it('seed 437527: a load that fills the replica takes the room an unload made for another adapter', async () => {
    await holds(
      437527,
      {
        nodes: 3,
        replicas: 3,
        maxLoadedAdapters: 1,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math', 'law', 'med', 'fin', 'bio'],
        loadMs: 200,
        decodeMsPerStep: 50,
        coldLoadsPerMinute: 6,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 1000,
        spanMs: 2000,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 2000,
      },
      [
        { at: 21, kind: 'request', node: 2, adapter: 9, tokens: 1, prompt: 1067 },
        { at: 98, kind: 'request', node: 1, adapter: 8, tokens: 1, prompt: 1650 },
        { at: 165, kind: 'skew', node: 0, ms: 127 },
        { at: 169, kind: 'request', node: 1, adapter: 5, tokens: 1, prompt: 345 },
        { at: 321, kind: 'skew', node: 1, ms: 281 },
        { at: 405, kind: 'request', node: 0, adapter: -1, tokens: 6, prompt: 269 },
        { at: 508, kind: 'request', node: 0, adapter: 3, tokens: 4, prompt: 1198 },
        { at: 619, kind: 'request', node: 2, adapter: 7, tokens: 5, prompt: 847 },
        { at: 684, kind: 'request', node: 0, adapter: 6, tokens: 2, prompt: 621 },
        { at: 817, kind: 'request', node: 2, adapter: 6, tokens: 4, prompt: 413 },
        { at: 818, kind: 'request', node: 1, adapter: 7, tokens: 6, prompt: 1040 },
        { at: 877, kind: 'request', node: 1, adapter: 4, tokens: 1, prompt: 1333 },
        { at: 1267, kind: 'request', node: 1, adapter: 0, tokens: 1, prompt: 964 },
        { at: 1477, kind: 'request', node: 0, adapter: 2, tokens: 3, prompt: 1306 },
        { at: 1615, kind: 'request', node: 0, adapter: 0, tokens: 1, prompt: 1229 },
        { at: 1844, kind: 'request', node: 2, adapter: 4, tokens: 3, prompt: 1993 },
      ],
    );
  }, 30_000);
});

describe('a request is sent or refused within its access bound: a lease aged out under a live wait for room', () => {
  // Seed 1251595 (all 98 actions: shrinking keeps 97; the emptied passes' shape, 74 FLUSHALLs at
  // 335-513 ms, none later; node_ttl_ms 500, two replicas of one slot, loads of 1.5 s,
  // lease_max_age_ms 4 s). `team,a` on node 2 came at 1084 ms and took its lease on replica-0, then
  // waited for room there behind `sql`, `geo` and `med` for 6.8 s, past lease_max_age_ms: the expiry
  // sweep reclaimed its lease, so its load landed (7,846 ms) with no lease on `team,a`, and 3 ms later
  // another waiter read it loaded with nothing in flight and unloaded it for room; twice more, and
  // it was answered 17,300 ms after it came (bound 16,500 ms). A lease bounds a dead holder's count;
  // now a request waiting under its lease takes a fresh one every half lease_max_age_ms
  // (src/router/waiting-lease.ts), so its load lands under a lease.
  it('seed 1251595: a load made for a request still waiting lands under its lease', async () => {
    const flushes = [
      335, 339, 342, 343, 347, 349, 352, 355, 359, 360, 362, 363, 365, 369, 370, 373, 374, 376, 379, 381, 382,
      386, 387, 390, 392, 394, 395, 398, 399, 402, 405, 406, 408, 410, 412, 416, 420, 423, 424, 427, 428, 432,
      434, 436, 438, 440, 444, 447, 450, 454, 455, 457, 458, 461, 465, 469, 473, 477, 479, 480, 483, 487, 489,
      490, 492, 495, 497, 499, 500, 502, 506, 508, 511, 513,
    ].map((at): Schedule['actions'][number] => ({ at, kind: 'flushall' }));
    const requests: Schedule['actions'] = [
      { at: 262, kind: 'request', node: 2, adapter: 3, tokens: 2, prompt: 1414 },
      { at: 273, kind: 'request', node: 1, adapter: 9, tokens: 3, prompt: 1134 },
      { at: 352, kind: 'request', node: 1, adapter: 7, tokens: 6, prompt: 1039 },
      { at: 373, kind: 'request', node: 2, adapter: 2, tokens: 3, prompt: 66 },
      { at: 430, kind: 'request', node: 0, adapter: 8, tokens: 1, prompt: 1519 },
      { at: 475, kind: 'request', node: 0, adapter: 5, tokens: 1, prompt: 374 },
      { at: 615, kind: 'request', node: 1, adapter: 6, tokens: 5, prompt: 442 },
      { at: 615, kind: 'request', node: 1, adapter: 4, tokens: 2, prompt: 1538 },
      { at: 616, kind: 'request', node: 1, adapter: 4, tokens: 6, prompt: 520 },
      { at: 616, kind: 'request', node: 1, adapter: 2, tokens: 1, prompt: 436 },
      { at: 726, kind: 'request', node: 0, adapter: 7, tokens: 6, prompt: 911 },
      { at: 730, kind: 'request', node: 0, adapter: 2, tokens: 1, prompt: 373 },
      { at: 1020, kind: 'request', node: 2, adapter: 4, tokens: 6, prompt: 1037 },
      { at: 1077, kind: 'request', node: 1, adapter: 11, tokens: 4, prompt: 553 },
      { at: 1084, kind: 'request', node: 2, adapter: 2, tokens: 1, prompt: 1066 },
      { at: 1087, kind: 'request', node: 2, adapter: 0, tokens: 2, prompt: 318 },
      { at: 1143, kind: 'request', node: 2, adapter: 6, tokens: 1, prompt: 283 },
      { at: 1842, kind: 'request', node: 0, adapter: 9, tokens: 4, prompt: 769 },
      { at: 1901, kind: 'request', node: 1, adapter: 8, tokens: 2, prompt: 1136 },
      { at: 1932, kind: 'request', node: 1, adapter: 0, tokens: 4, prompt: 1306 },
      { at: 2635, kind: 'request', node: 2, adapter: 5, tokens: 3, prompt: 1420 },
      { at: 3516, kind: 'request', node: 0, adapter: 7, tokens: 4, prompt: 1747 },
      { at: 3940, kind: 'request', node: 0, adapter: 7, tokens: 2, prompt: 1095 },
      { at: 3972, kind: 'request', node: 0, adapter: 11, tokens: 6, prompt: 1169 },
    ];
    // As drawn: by time, a FLUSHALL before a request at the same ms (a stable sort).
    const actions = [...flushes, ...requests].sort((a, b) => a.at - b.at);
    const r = await runSchedule({
      seed: 1251595,
      world: {
        ...WORLD,
        replicas: 2,
        spanMs: 4118,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 500,
      },
      actions,
    });
    expect(r.violation?.detail).toBeUndefined();
  }, 60_000);
});

describe('a hold never waits with nothing that could change: a call sent into a partition times out after its heal', () => {
  // Seed 1638475 (--keep 0,1,2; the check's): every node cut off from Redis 1,103-1,311 ms. Node 1's
  // request for `team` (1,352 ms) needs room on replica-0 (`chat` idle, limit 1): unloads are held
  // off there until 2,002 (the state's first registration), and node 1 decides alone from 1,737 ms:
  // a call it sent 74 ms before the heal timed out (the record's 500 ms). Deciding alone it unloads
  // nothing; its probe took the state back at 2,758 and held unloads off for two probes, to 4,758;
  // `chat` was unloaded at 4,771 and the request routed at 5,003 (3,651 ms). The check took the fleet
  // as quiet from the heal; it is quiet from the last call sent into the partition timing out.
  it('seed 1638475: a node that began deciding alone after the heal', async () => {
    await holds(
      1638475,
      {
        nodes: 3,
        replicas: 2,
        maxLoadedAdapters: 1,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math', 'law', 'med', 'fin'],
        loadMs: 200,
        decodeMsPerStep: 100,
        coldLoadsPerMinute: 6,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 0,
        spanMs: 2000,
        queueTimeoutMs: 4000,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 2000,
        prefetch: { intervalMs: 1000, halfLifeMs: 3000, loadsPerMinute: 30, hysteresis: 1, evictFactor: 8 },
      },
      [
        { at: 34, kind: 'request', node: 1, adapter: 1, tokens: 1, prompt: 428 },
        { at: 1103, kind: 'partition', node: -1, ms: 208 },
        { at: 1352, kind: 'request', node: 1, adapter: 3, tokens: 5, prompt: 995 },
      ],
    );
  }, 30_000);
});

describe('every request answered: requests that come after the span', () => {
  // Seed 2401991 (--keep 2,3,13,17,18; failed on f89a80c and, without its client draws, on 1470bf12
  // before it): a false alarm of the world's run, not a router bug. The shape of dst/reach.ts
  // `ownRegistrationAfterEmptying` drew its pressing requests in [pushAt + node_ttl_ms, sendAt + hop]
  // with the span set to its end: a window upside down when the hop is shorter than the grace after
  // the push, so they came at 7086-7204 ms, past the span of 7085 ms. The tail (70 s, until no request
  // is under way) then stopped at 7085 ms, before they came, and the settling's 3 s ended while node
  // 0's two requests (math, team,a) were still loading: "2 request(s) unanswered 70 s after the last
  // came" at 10085 ms. Given the span, they are answered at 10112 and 10306 ms. The run now lasts
  // until the last action came (dst/world.ts).
  it('seed 2401991: requests that come after the span get the whole tail to be answered', async () => {
    await holds(
      2401991,
      {
        nodes: 3,
        replicas: 3,
        maxLoadedAdapters: 4,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math', 'law'],
        loadMs: 1500,
        decodeMsPerStep: 100,
        coldLoadsPerMinute: 1000,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 0,
        spanMs: 7085,
        queueTimeoutMs: 4000,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 2000,
        sloClasses: [
          { name: 'interactive', ttft_ms: 1000, priority: 0 },
          { name: 'batch', ttft_ms: 2500, priority: -1 },
        ],
      },
      [
        { at: 258, kind: 'request', node: 0, adapter: 1, tokens: 2, prompt: 900 },
        { at: 636, kind: 'request', node: 1, adapter: 0, tokens: 3, prompt: 1002, cls: 'batch' },
        { at: 5106, kind: 'flushall' },
        { at: 7090, kind: 'request', node: 0, adapter: 6, tokens: 1, prompt: 1998, sourceMs: 93 },
        { at: 7091, kind: 'request', node: 0, adapter: 2, tokens: 3, prompt: 1961, exit: true },
      ],
    );
  }, 60_000);
});
