/**
 * Kept schedules (./holds.ts) for "no unload of a busy adapter" (docs/reliability.md): an unload under
 * a request the unloader could not see (unseen routers, peers on other state, a misread replica word,
 * aged leases).
 */
import { runSchedule } from '../../../dst/run';
import { WORLD, holds } from './holds';

describe('schedules the simulation found', () => {
  // Issue 31 item 1a, found with the fix reverted (a name with a comma never read back from
  // vLLM's joined running_lora_adapters): seed 45 (--keep 0,1,2,3,4,5,6,7), the generator's
  // comma shape. Node 0, cut off from Redis with the others, sends a 109-token request for
  // `team,a`; its lease is never renewed by the replica's word, ages out, and an unload making
  // room takes `team,a` on a word that reads `team` and `a` busy, not it (`team,a unloaded with 1
  // running and 0 waiting`).
  it('seed 45 (issue 31 item 1a): a name with a comma is not unloaded under its running request', async () => {
    const r = await runSchedule({
      seed: 45,
      world: {
        ...WORLD,
        replicas: 2,
        maxLoadedAdapters: 2,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math', 'law', 'med', 'fin'],
        decodeMsPerStep: 50,
        ttftSloMs: 0,
      },
      actions: [
        { at: 290, kind: 'request', node: 1, adapter: 2, tokens: 3, prompt: 1044 },
        { at: 319, kind: 'request', node: 2, adapter: 7, tokens: 6, prompt: 1447 },
        { at: 1067, kind: 'partition', node: -1, ms: 2455 },
        { at: 1234, kind: 'request', node: 0, adapter: 2, tokens: 109, prompt: 702 },
        { at: 1287, kind: 'request', node: 0, adapter: -1, tokens: 3, prompt: 1566 },
        { at: 1693, kind: 'request', node: 0, adapter: 1, tokens: 2, prompt: 238 },
        { at: 1849, kind: 'record-change', otherState: false, gapMs: 350 },
        { at: 1933, kind: 'request', node: 2, adapter: 3, tokens: 5, prompt: 1034 },
      ],
    });
    expect(r.violation).toBeUndefined();
  }, 30_000);
  // Seed 101305 (--keep 10,12,13,14,18,19,25,26,28,30,34,36; 101703 is the same kind): node 1, slowed,
  // decides alone and sends a request for `code` to replica-1 with no lease in Redis; node 2 trims
  // replica-1, and its fresh scrape was a `/metrics` text cut mid-line yet answered as a 200, whose
  // newest `vllm:lora_requests_info` series was gone: `code unloaded with 1 running and 0 waiting`.
  // The model's, not the router's: a body cut in transit is an error to the router's HTTP client
  // (test/core/cut-body.test.ts), a scrape that did not answer, and no unload follows one. The
  // truncated-scrape fault now resets the connection mid-body, as its own comment said it did.
  it('seed 101305: a /metrics answer cut in transit is no answer, not an idle word', async () => {
    const r = await runSchedule({
      seed: 101305,
      world: {
        ...WORLD,
        replicas: 2,
        maxLoadedAdapters: 2,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math'],
        loadMs: 800,
        decodeMsPerStep: 50,
        coldLoadsPerMinute: 6,
        ttftSloMs: 0,
      },
      actions: [
        { at: 2457, kind: 'partition', node: 0, ms: 2817 },
        { at: 3015, kind: 'request', node: 1, adapter: 6, tokens: 4, prompt: 1343 },
        { at: 3038, kind: 'switch', lost: 1 },
        { at: 3060, kind: 'request', node: 1, adapter: 4, tokens: 59, prompt: 485 },
        { at: 3640, kind: 'request', node: 2, adapter: 5, tokens: 6, prompt: 295 },
        { at: 3714, kind: 'request', node: 0, adapter: 0, tokens: 1, prompt: 888 },
        { at: 4339, kind: 'request', node: 0, adapter: 3, tokens: 24, prompt: 959 },
        { at: 4590, kind: 'scrape', replica: 1, ms: 3621, mode: 'truncated' },
        { at: 4700, kind: 'switch', lost: 1 },
        { at: 4968, kind: 'request', node: 1, adapter: -1, tokens: 4, prompt: 1218 },
        { at: 5218, kind: 'request', node: 1, adapter: 5, tokens: 3, prompt: 1300 },
        { at: 5777, kind: 'slow', node: 1, ms: 1334, slowMs: 444 },
      ],
    });
    expect(r.violation).toBeUndefined();
  }, 30_000);
  // Seed 102764 (--keep 0,2,6,9,10,19,20,21,24): node 2, cut off from Redis, sends a long request
  // for `med` to replica-1 with no lease in Redis; replica-1's `/metrics` then answers 200 with its
  // label quotes gone (the garbled fault), so no `vllm:lora_requests_info` line parses; node 1,
  // making room for `code`, read that as a replica that cannot say and unloaded `med` on the
  // lease rules alone: `med unloaded with 1 running and 0 waiting`. A text with a line no
  // Prometheus client writes is now no word to unload on (test/core/replica-clock.test.ts).
  it(
    'seed 102764: a /metrics text not written whole is no word to unload on',
    () =>
      holds(
        102764,
        {
          ...WORLD,
          replicas: 2,
          maxLoadedAdapters: 2,
          adapters: WORLD.adapters.slice(0, 10),
          loadMs: 200,
        },
        [
          { at: 210, kind: 'request', node: 0, adapter: 3, tokens: 2, prompt: 308 },
          { at: 426, kind: 'request', node: 1, adapter: 8, tokens: 1, prompt: 1016 },
          { at: 1089, kind: 'partition', node: 2, ms: 2317 },
          { at: 1192, kind: 'request', node: 0, adapter: 9, tokens: 4, prompt: 1530 },
          { at: 1280, kind: 'request', node: 2, adapter: 8, tokens: 51, prompt: 1097 },
          { at: 2610, kind: 'request', node: 1, adapter: 3, tokens: 45, prompt: 1437 },
          { at: 2615, kind: 'scrape', replica: 1, ms: 2312, mode: 'garbled' },
          { at: 2701, kind: 'request', node: 1, adapter: 6, tokens: 3, prompt: 135 },
          { at: 3424, kind: 'request', node: 1, adapter: 5, tokens: 6, prompt: 1602 },
        ],
      ),
    30_000,
  );
  // Seed 102923 (all 45 actions: dropping any changes the seeded trips and the break goes): a
  // request for `chat` takes its lease at admission on node 0 (5890 ms) and waits for another
  // node's load, slowed (2.7 s late, given up at load_timeout_ms), which lands later and a poll
  // adopts; meanwhile node 1's expiry sweep reclaims the lease by age (lease_max_age_ms 4 s,
  // 10096 ms). Node 2 trims the replica's excess and unloads `chat` as the request, proxied on the
  // reclaimed lease, arrives: `chat unloaded with 0 running and 1 waiting`. An admission that
  // waited past half lease_max_age_ms now takes a fresh lease (test/core/lease-through-load.test.ts).
  it(
    'seed 102923: a request is proxied on a lease the store holds, however long it waited',
    () =>
      holds(
        102923,
        {
          ...WORLD,
          adapters: ['sql', 'chat', 'team,a', 'team', 'a'],
          decodeMsPerStep: 50,
          ttftSloMs: 0,
        },
        [
          { at: 270, kind: 'request', node: 0, adapter: 2, tokens: 4, prompt: 1927 },
          { at: 285, kind: 'request', node: 0, adapter: 2, tokens: 6, prompt: 509 },
          { at: 698, kind: 'request', node: 2, adapter: 3, tokens: 2, prompt: 522 },
          { at: 1019, kind: 'request', node: 1, adapter: 4, tokens: 1, prompt: 359 },
          { at: 1226, kind: 'request', node: 2, adapter: 2, tokens: 87, prompt: 1052 },
          { at: 1505, kind: 'request', node: 1, adapter: 1, tokens: 3, prompt: 1476 },
          { at: 1598, kind: 'request', node: 2, adapter: 3, tokens: 5, prompt: 732 },
          { at: 1703, kind: 'request', node: 2, adapter: 3, tokens: 1, prompt: 1789 },
          { at: 1718, kind: 'request', node: 2, adapter: 2, tokens: 1, prompt: 95 },
          { at: 1770, kind: 'request', node: 1, adapter: 0, tokens: 3, prompt: 1207 },
          { at: 1918, kind: 'request', node: 2, adapter: 2, tokens: 4, prompt: 1969 },
          { at: 2080, kind: 'request', node: 2, adapter: 3, tokens: 2, prompt: 1497 },
          { at: 2124, kind: 'redis-restart', empty: true, downMs: 112 },
          { at: 2204, kind: 'request', node: 1, adapter: -1, tokens: 4, prompt: 1860 },
          { at: 2240, kind: 'request', node: 0, adapter: 0, tokens: 57, prompt: 1021 },
          { at: 2314, kind: 'request', node: 0, adapter: 0, tokens: 3, prompt: 1283 },
          { at: 2316, kind: 'request', node: 2, adapter: 0, tokens: 53, prompt: 184 },
          { at: 2554, kind: 'request', node: 0, adapter: 2, tokens: 3, prompt: 880 },
          { at: 2584, kind: 'request', node: 1, adapter: 1, tokens: 1, prompt: 1134 },
          { at: 2614, kind: 'request', node: 0, adapter: 4, tokens: 3, prompt: 1885 },
          { at: 2715, kind: 'request', node: 0, adapter: 3, tokens: 35, prompt: 796 },
          { at: 2838, kind: 'request', node: 2, adapter: 1, tokens: 1, prompt: 225 },
          { at: 2866, kind: 'request', node: 1, adapter: 1, tokens: 1, prompt: 784 },
          { at: 2881, kind: 'request', node: 2, adapter: 3, tokens: 6, prompt: 1583 },
          { at: 3080, kind: 'request', node: 2, adapter: 0, tokens: 5, prompt: 1810 },
          { at: 3183, kind: 'request', node: 1, adapter: 2, tokens: 30, prompt: 825 },
          { at: 3247, kind: 'request', node: 0, adapter: 4, tokens: 2, prompt: 613 },
          { at: 3430, kind: 'request', node: 2, adapter: 4, tokens: 2, prompt: 1860 },
          { at: 3448, kind: 'request', node: 2, adapter: 3, tokens: 2, prompt: 1982 },
          { at: 3665, kind: 'request', node: 0, adapter: 0, tokens: 4, prompt: 1888 },
          { at: 3861, kind: 'request', node: 1, adapter: 0, tokens: 3, prompt: 842 },
          { at: 3878, kind: 'request', node: 1, adapter: 2, tokens: 6, prompt: 1379 },
          { at: 4075, kind: 'request', node: 0, adapter: 2, tokens: 2, prompt: 1537 },
          { at: 4329, kind: 'request', node: 2, adapter: 0, tokens: 4, prompt: 818 },
          { at: 4456, kind: 'request', node: 0, adapter: 3, tokens: 6, prompt: 886 },
          { at: 4510, kind: 'request', node: 0, adapter: 1, tokens: 1, prompt: 897 },
          { at: 4837, kind: 'request', node: 2, adapter: 3, tokens: 35, prompt: 1539 },
          { at: 4922, kind: 'request', node: 0, adapter: 3, tokens: 6, prompt: 658 },
          { at: 4994, kind: 'request', node: 2, adapter: -1, tokens: 3, prompt: 1139 },
          { at: 5081, kind: 'slow-load', replica: 2, ms: 3215, slowMs: 2709 },
          { at: 5358, kind: 'request', node: 2, adapter: 2, tokens: 53, prompt: 926 },
          { at: 5455, kind: 'request', node: 2, adapter: 0, tokens: 6, prompt: 1439 },
          { at: 5507, kind: 'request', node: 0, adapter: 0, tokens: 1, prompt: 1147 },
          { at: 5849, kind: 'request', node: 2, adapter: 2, tokens: 6, prompt: 812 },
          { at: 5882, kind: 'request', node: 1, adapter: 2, tokens: 30, prompt: 1093 },
        ],
      ),
    60_000,
  );
  // Seed 1026501 (all 16 actions): node 0, cut off from Redis since 426 ms, decides alone to load
  // `a` on replica-1 (1299 ms), where node 2 had loaded it; vLLM answers "already loaded" and node 0
  // sends its first request of `a` (1301.0 ms). Node 2, on Redis, making room for `code`, had read
  // the replica's word (idle) before that request came, and no lease holds `a` in Redis: it unloads
  // `a` 0.3 ms after (`a unloaded with 1 running and 0 waiting`). docs/reliability.md ("An adapter
  // someone unseen routes is held", not covered) leaves an unseen router's first request to chance:
  // the check held the router to more than the docs promise, and now exempts such a request.
  it("seed 1026501: an unseen router's first request, after the unloading node's word, is not held to (i)", async () => {
    await holds(
      1026501,
      {
        ...WORLD,
        replicas: 2,
        adapters: WORLD.adapters.slice(0, 9),
        loadMs: 200,
        coldLoadsPerMinute: 6,
        spanMs: 2000,
        upstreamTimeoutMs: 5000,
      },
      [
        { at: 54, kind: 'request', node: 0, adapter: 8, tokens: 4, prompt: 159 },
        { at: 228, kind: 'request', node: 1, adapter: 1, tokens: 3, prompt: 1776 },
        { at: 426, kind: 'partition', node: 0, ms: 1221 },
        { at: 591, kind: 'request', node: 2, adapter: 4, tokens: 2, prompt: 378 },
        { at: 840, kind: 'request', node: 0, adapter: 3, tokens: 1, prompt: 1016 },
        { at: 1269, kind: 'request', node: 2, adapter: 5, tokens: 2, prompt: 806 },
        { at: 1298, kind: 'request', node: 0, adapter: 4, tokens: 4, prompt: 403 },
        { at: 1407, kind: 'request', node: 1, adapter: 6, tokens: 2, prompt: 1194 },
        { at: 1539, kind: 'request', node: 0, adapter: -1, tokens: 5, prompt: 1840 },
        { at: 1701, kind: 'redis-restart', empty: true, downMs: 1884 },
        { at: 1767, kind: 'replica-restart', replica: 1, downMs: 203 },
        { at: 1835, kind: 'request', node: 1, adapter: 5, tokens: 6, prompt: 142 },
        { at: 1931, kind: 'skew', node: 0, ms: -123 },
        { at: 1951, kind: 'request', node: 2, adapter: 4, tokens: 3, prompt: 1305 },
        { at: 1958, kind: 'request', node: 2, adapter: 6, tokens: 3, prompt: 960 },
        { at: 1987, kind: 'request', node: 1, adapter: 8, tokens: 60, prompt: 1295 },
      ],
    );
  }, 30_000);
  // Issue 31 item 1a on the generator drawing node_ttl_ms (seed 45 above breaks with the fix reverted
  // only at node_ttl_ms 500: at the default 2 s no node cut off has read a whole node count, so none
  // loads alone). Seed 10 (--keep 2,3,4,9,10,14), no partition: node 2's 89-token request on
  // `team,a` (100 ms a token) outlives lease_max_age_ms on one-slot replicas; its lease, never renewed
  // by a word that reads only `team` and `a`, ages out, and an unload making room takes `team,a`
  // under it (`team,a unloaded with 1 running and 0 waiting`).
  it('seed 10 (issue 31 item 1a): a name with a comma is read running from the joined list', async () => {
    await holds(
      10,
      {
        ...WORLD,
        adapters: WORLD.adapters.slice(0, 6),
        spanMs: 6000,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 2000,
      },
      [
        { at: 183, kind: 'request', node: 2, adapter: 2, tokens: 89, prompt: 1010 },
        { at: 244, kind: 'request', node: 1, adapter: 5, tokens: 1, prompt: 1133 },
        { at: 368, kind: 'request', node: 1, adapter: 1, tokens: 4, prompt: 706 },
        { at: 1229, kind: 'request', node: 0, adapter: 0, tokens: 5, prompt: 1618 },
        { at: 1253, kind: 'switch', lost: 0 },
        { at: 1722, kind: 'request', node: 0, adapter: 3, tokens: 58, prompt: 1287 },
      ],
    );
  }, 30_000);
});

describe('no unload of a busy adapter: a peer on other state during a record change', () => {
  // Seed 37593 (all 16 actions; none can be dropped): a `redis` record change to other state reaches
  // node 0 at 1,838 ms, node 1 and node 2 only after 2,036 ms. Node 2, still on the old state, makes
  // room for `sql` on replica-0 (limit 1): it locks `chat` there (no lease of it in the old state),
  // asks the replica's word at 1,925 ms (idle), and unloads it at 1,927 ms; node 0's request for `chat`,
  // decided on the new state from its own poll, reached the engine at 1,926 ms, between the two. No
  // node can see it: its lease is in a state node 2 does not read, and the word was written before it
  // came (docs/reliability.md, "An adapter someone unseen routes is held", not covered). The check
  // exempted only routers deciding alone; it now exempts a peer's first request on other state too.
  it('seed 37593: an unload on the old state under a peer request routed on the new one is the window left open', async () => {
    await holds(
      37593,
      {
        nodes: 3,
        replicas: 2,
        maxLoadedAdapters: 1,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math', 'law', 'med', 'fin', 'bio'],
        loadMs: 800,
        decodeMsPerStep: 100,
        coldLoadsPerMinute: 3,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 1000,
        spanMs: 2000,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 2000,
      },
      [
        { at: 38, kind: 'request', node: 2, adapter: 10, tokens: 2, prompt: 274 },
        { at: 134, kind: 'request', node: 0, adapter: 2, tokens: 3, prompt: 307 },
        { at: 138, kind: 'request', node: 2, adapter: 1, tokens: 1, prompt: 1728 },
        { at: 215, kind: 'request', node: 0, adapter: 1, tokens: 2, prompt: 1125 },
        { at: 583, kind: 'request', node: 2, adapter: 3, tokens: 2, prompt: 839 },
        { at: 666, kind: 'request', node: 2, adapter: 1, tokens: 5, prompt: 1691 },
        { at: 990, kind: 'request', node: 1, adapter: 1, tokens: 6, prompt: 721 },
        { at: 1138, kind: 'record-change', otherState: false, gapMs: 189 },
        { at: 1158, kind: 'request', node: 0, adapter: 6, tokens: 35, prompt: 976 },
        { at: 1382, kind: 'request', node: 1, adapter: 10, tokens: 5, prompt: 35 },
        { at: 1672, kind: 'request', node: 1, adapter: 0, tokens: 6, prompt: 1963 },
        { at: 1695, kind: 'request', node: 0, adapter: 6, tokens: 5, prompt: 1085 },
        { at: 1838, kind: 'record-change', otherState: true, gapMs: 198 },
        { at: 1916, kind: 'request', node: 0, adapter: 1, tokens: 6, prompt: 854 },
        { at: 1920, kind: 'request', node: 2, adapter: 7, tokens: 2, prompt: 253 },
        { at: 1922, kind: 'request', node: 2, adapter: 0, tokens: 1, prompt: 1609 },
      ],
    );
  }, 30_000);
});

describe('no unload of a busy adapter: a FLUSHALL, then a record change on the same state', () => {
  // Seed 150271 (16 actions, none can be dropped): a FLUSHALL at 1,828 ms, then a `redis` record change on the
  // same state reaches node 0 at 1,933 ms, whose new runtime registers the replicas first. The simulated
  // Redis counted epoch candidates per link (`n0g0.0`), so it set the very epoch node 0's first runtime had
  // set at the start: no node that knew the old state learned it was emptied. Node 0's old runtime never
  // took again the lease of its request for `sql` waiting for room since 573 ms, node 2 never held off, and
  // its eviction unloaded `sql` on replica-1 at 2,396 ms as that request went there (`sql unloaded with 1
  // running and 0 waiting`). The model's, not the router's: the script's epochs are 64 random bits.
  it("seed 150271: a same-state successor's registration after a FLUSHALL sets an epoch nobody saw", async () => {
    await holds(
      150271,
      {
        ...WORLD,
        replicas: 2,
        maxLoadedAdapters: 1,
        adapters: WORLD.adapters.slice(0, 6),
        loadMs: 200,
        decodeMsPerStep: 50,
        spanMs: 2000,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 2000,
      },
      [
        { at: 66, kind: 'request', node: 1, adapter: -1, tokens: 5, prompt: 1037 },
        { at: 204, kind: 'request', node: 2, adapter: 5, tokens: 1, prompt: 850 },
        { at: 447, kind: 'request', node: 0, adapter: 1, tokens: 2, prompt: 867 },
        { at: 573, kind: 'request', node: 0, adapter: 0, tokens: 1, prompt: 798 },
        { at: 590, kind: 'request', node: 2, adapter: 1, tokens: 4, prompt: 1638 },
        { at: 698, kind: 'load-fail', replica: 0, count: 2, failure: 'rank' },
        { at: 854, kind: 'request', node: 1, adapter: -1, tokens: 4, prompt: 102 },
        { at: 990, kind: 'request', node: 1, adapter: 4, tokens: 6, prompt: 410 },
        { at: 1227, kind: 'request', node: 0, adapter: 5, tokens: 1, prompt: 1120 },
        { at: 1347, kind: 'request', node: 2, adapter: 4, tokens: 6, prompt: 1127 },
        { at: 1548, kind: 'request', node: 1, adapter: 4, tokens: 1, prompt: 1164 },
        { at: 1710, kind: 'request', node: 2, adapter: 1, tokens: 2, prompt: 46 },
        { at: 1823, kind: 'request', node: 2, adapter: -1, tokens: 1, prompt: 1345 },
        { at: 1828, kind: 'flushall' },
        { at: 1933, kind: 'record-change', otherState: false, gapMs: 1156 },
        { at: 1952, kind: 'request', node: 0, adapter: 5, tokens: 4, prompt: 1071 },
      ],
    );
  }, 30_000);
});

describe('no unload of a busy adapter: a resident a poll adopted and read busy, no lease here', () => {
  // Seed 1965638 (--keep 0,1,2,3,7,10,11,12,15,16,17,21,22,23; the router's): an empty Redis restart
  // at 107 ms (down 298 ms) loses node 2's lease of `sql` on replica-1, whose load lands at 902; node 2
  // decides alone from 245 ms (a call refused while Redis was down) and is cut off from Redis from 749
  // (1,207 ms), so its probes never take the state back before 2,745. Its request of `sql` runs on
  // replica-1 905-1,260 with no lease in Redis. Node 0's poll begun at 955 reads `sql` running; the
  // emptied state did not know `sql`, so the poll's own registry read adopted it (lastUsed = the
  // snapshot's time), and the hold took that lastUsed past the poll's start for a lease released while
  // the reading travelled back: no hold. Node 2's next request of `sql` (1,175 ms, alone) crosses a
  // slow path to replica-1 (1,722 ms each way); node 0 unloaded `sql` at 2,521 to make room for
  // `team` on an idle word, 1,561 ms after its poll read `sql` busy, inside the 2 s hold.
  it('seed 1965638: a poll that adopts a busy adapter starts the unseen hold', async () => {
    await holds(
      1965638,
      {
        nodes: 3,
        replicas: 2,
        maxLoadedAdapters: 2,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math', 'law'],
        loadMs: 800,
        decodeMsPerStep: 100,
        coldLoadsPerMinute: 1000,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 1000,
        spanMs: 2000,
        staticAdapters: ['sql,chat'],
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 500,
        sloClasses: [
          { name: 'interactive', ttft_ms: 1000, priority: 0 },
          { name: 'batch', ttft_ms: 2500, priority: -1, max_in_flight: 1 },
        ],
      },
      [
        { at: 77, kind: 'request', node: 2, adapter: 0, tokens: 1, prompt: 1495, cls: 'batch' },
        { at: 107, kind: 'redis-restart', empty: true, downMs: 298 },
        { at: 157, kind: 'request', node: 1, adapter: -1, tokens: 6, prompt: 1583, cls: 'batch' },
        { at: 243, kind: 'request', node: 2, adapter: 6, tokens: 6, prompt: 1425, cls: 'interactive' },
        { at: 749, kind: 'partition', node: 2, ms: 1207 },
        { at: 1113, kind: 'slow-path', node: 2, replica: 1, ms: 681, hopMs: 1722 },
        { at: 1162, kind: 'request', node: 0, adapter: 5, tokens: 4, prompt: 1833, cls: 'batch' },
        { at: 1175, kind: 'request', node: 2, adapter: 0, tokens: 2, prompt: 367, cls: 'interactive' },
        { at: 1382, kind: 'request', node: 2, adapter: 1, tokens: 30, prompt: 380, cls: 'batch' },
        { at: 1423, kind: 'request', node: 2, adapter: 1, tokens: 21, prompt: 455, cls: 'batch' },
        { at: 1442, kind: 'request', node: 1, adapter: 1, tokens: 30, prompt: 215, cls: 'batch' },
        { at: 1691, kind: 'request', node: 0, adapter: 3, tokens: 3, prompt: 1694 },
        { at: 1741, kind: 'skew', node: 1, ms: 223 },
        { at: 1754, kind: 'request', node: 1, adapter: 4, tokens: 5, prompt: 164, cls: 'interactive' },
      ],
    );
  }, 30_000);
});

describe("an unseen router's request run beside a lease of the unloader's own", () => {
  // Seed 3044822 (--keep 0,1,2,3,4,5,6,7,8,10,11,12,13,14,15): node 1, cut off from Redis 535-3,180 ms
  // and still deciding alone after (its probe had not recovered), ran `team,a` on replica-1 from
  // 2,371 to 2,717.5 ms beside node 0's own request there (2,378-3,219.5 ms, leased on database 1,
  // where a record change at 1,353 ms had moved node 0). Node 0's poll at 2,408 ms read `team,a`
  // busy; the lease it had held since before the poll explained the reading, so no unseen hold
  // started (docs/reliability.md, "An adapter someone unseen routes is held", not covered: the word
  // names the adapters, not how many requests of each). Node 0 read it idle at 3,468.8 ms (its word,
  // the unload granted under its lock) and unloaded it; node 1's next request reached the engine at
  // 3,469.8 ms, 1 ms before the unload. The router did what the docs say; the check took the 2,408 ms
  // read for one that held the adapter: a gap in the check, not in src/.
  it('seed 3044822: a read its own lease explained held nothing, the next unseen request is chance', async () => {
    await holds(
      3044822,
      {
        nodes: 3,
        replicas: 3,
        maxLoadedAdapters: 1,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math', 'law', 'med'],
        loadMs: 800,
        decodeMsPerStep: 100,
        coldLoadsPerMinute: 6,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 1000,
        spanMs: 2000,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 500,
      },
      [
        { at: 178, kind: 'request', node: 1, adapter: -1, tokens: 2, prompt: 591 },
        { at: 309, kind: 'request', node: 2, adapter: 4, tokens: 3, prompt: 1478 },
        { at: 527, kind: 'request', node: 1, adapter: 2, tokens: 1, prompt: 1219 },
        { at: 535, kind: 'partition', node: 1, ms: 2645 },
        { at: 639, kind: 'request', node: 0, adapter: 3, tokens: 3, prompt: 846 },
        { at: 753, kind: 'request', node: 2, adapter: 1, tokens: 1, prompt: 1657 },
        { at: 931, kind: 'request', node: 2, adapter: 4, tokens: 3, prompt: 335 },
        { at: 1078, kind: 'request', node: 0, adapter: 2, tokens: 6, prompt: 615 },
        { at: 1136, kind: 'request', node: 0, adapter: 6, tokens: 2, prompt: 1616 },
        { at: 1353, kind: 'record-change', otherState: true, gapMs: 6 },
        { at: 1721, kind: 'request', node: 2, adapter: 8, tokens: 2, prompt: 250 },
        { at: 1750, kind: 'request', node: 1, adapter: 6, tokens: 23, prompt: 931 },
        { at: 1914, kind: 'request', node: 1, adapter: 2, tokens: 3, prompt: 1682 },
        { at: 1981, kind: 'request', node: 0, adapter: 4, tokens: 3, prompt: 1378 },
        { at: 1992, kind: 'request', node: 0, adapter: 1, tokens: 1, prompt: 972 },
      ],
    );
  }, 60_000);
});
