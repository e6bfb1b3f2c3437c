/**
 * Kept schedules (./holds.ts) for "a failed load is not tried again within the backoff"
 * (docs/reliability.md): on the clock the router measures it, from when it heard the failure, unless
 * it then read it listed.
 */
import { WORLD, holds } from './holds';

describe('a failed load is not tried again within the backoff: on the clock the router measures it', () => {
  // Seed 134920 (--keep 0,3,10,14,15): node 0's clock is 279 ms behind from 238 ms; replica-0 fails the
  // next four loads (vLLM's 404). Node 0's load of `team` fails there at 1,288 ms; at 1,700 ms its clock
  // steps to 247 ms ahead, and it loads `team` there again at 2,011 ms: 723 ms later in true time, 1,249 ms
  // on its own clock, past backoff_base_ms (1 s). The router measures the backoff on its clock (a real
  // node's is monotonic within a process: SystemClock); the check measured true time and now measures the
  // sender's clock.
  it("seed 134920: a failed load's backoff is measured on its node's clock, stepped ahead by a skew", async () => {
    await holds(
      134920,
      {
        ...WORLD,
        replicas: 2,
        maxLoadedAdapters: 4,
        adapters: WORLD.adapters.slice(0, 5),
        decodeMsPerStep: 50,
        coldLoadsPerMinute: 6,
        spanMs: 2000,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 2000,
      },
      [
        { at: 238, kind: 'skew', node: 0, ms: -279 },
        { at: 758, kind: 'load-fail', replica: 0, count: 4, failure: 'not-found' },
        { at: 1272, kind: 'request', node: 0, adapter: 3, tokens: 6, prompt: 1205 },
        { at: 1700, kind: 'skew', node: 0, ms: 247 },
        { at: 1992, kind: 'request', node: 0, adapter: 3, tokens: 4, prompt: 980 },
      ],
    );
  }, 30_000);
});

describe('a failed load is not tried again within the backoff: from when the router heard the failure', () => {
  // Seed 116306 (--keep 0,1,2,3,4,5,6,7,8,12,13,14,18,19,20,27,28,29,30,31,32,33,34,35,36,37,38,39,40,41,42,43,44,45,46,47;
  // drawn with the overload shapes; `--no-overload` draws another schedule): replica-0 fails its next two
  // loads (engine) from 389 ms. Node 0's load of `sql` there fails at 1,684 ms; node 0's clock steps 161 ms
  // back at 1,685 ms, before the answer's trip back: the router hears it at 1,686 ms, 1,525 on its clock,
  // and backs off until 2,525. It loads `sql` there again at 2,690 ms, 2,529 on its clock: 1,004 ms after it
  // heard, 845 after the answer on the clock before the step (1,006 ms of true time). The check stamped the
  // failure on the sender's clock when the replica answered; it now stamps it when the sender heard it.
  it("seed 116306: a failed load's backoff starts when its sender hears it, a clock step back between", async () => {
    await holds(
      116306,
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
        spanMs: 4348,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 500,
        queueTimeoutMs: 2000,
        maxNumSeqs: 4,
      },
      [
        { at: 48, kind: 'request', node: 0, adapter: 0, tokens: 55, prompt: 1655 },
        { at: 51, kind: 'request', node: 0, adapter: 4, tokens: 37, prompt: 1737 },
        { at: 53, kind: 'request', node: 0, adapter: 6, tokens: 53, prompt: 1087 },
        { at: 181, kind: 'request', node: 1, adapter: -1, tokens: 4, prompt: 1832 },
        { at: 302, kind: 'request', node: 0, adapter: -1, tokens: 29, prompt: 1051 },
        { at: 340, kind: 'request', node: 0, adapter: -1, tokens: 2, prompt: 1559 },
        { at: 343, kind: 'request', node: 0, adapter: 0, tokens: 43, prompt: 1360 },
        { at: 389, kind: 'load-fail', replica: 0, count: 2, failure: 'engine' },
        { at: 515, kind: 'request', node: 0, adapter: -1, tokens: 29, prompt: 1148 },
        { at: 701, kind: 'request', node: 0, adapter: 4, tokens: 41, prompt: 1567 },
        { at: 767, kind: 'request', node: 1, adapter: 4, tokens: 1, prompt: 870 },
        { at: 833, kind: 'redis-restart', empty: true, downMs: 2126 },
        { at: 1227, kind: 'request', node: 0, adapter: 6, tokens: 54, prompt: 1702 },
        { at: 1374, kind: 'request', node: 0, adapter: 0, tokens: 42, prompt: 1178 },
        { at: 1412, kind: 'request', node: 1, adapter: -1, tokens: 3, prompt: 464 },
        { at: 1637, kind: 'record-change', otherState: false, gapMs: 1193 },
        { at: 1650, kind: 'request', node: 2, adapter: 9, tokens: 1, prompt: 1965 },
        { at: 1650, kind: 'request', node: 0, adapter: 4, tokens: 39, prompt: 1775 },
        { at: 1685, kind: 'skew', node: 0, ms: -161 },
        { at: 2132, kind: 'request', node: 0, adapter: -1, tokens: 45, prompt: 1165 },
        { at: 2139, kind: 'request', node: 0, adapter: 6, tokens: 34, prompt: 1678 },
        { at: 2252, kind: 'request', node: 0, adapter: -1, tokens: 27, prompt: 1147 },
        { at: 2342, kind: 'request', node: 0, adapter: 6, tokens: 35, prompt: 1957 },
        { at: 2362, kind: 'request', node: 0, adapter: 6, tokens: 49, prompt: 1007 },
        { at: 2371, kind: 'request', node: 0, adapter: -1, tokens: 38, prompt: 1197 },
        { at: 2428, kind: 'request', node: 0, adapter: -1, tokens: 35, prompt: 1066 },
        { at: 2477, kind: 'request', node: 0, adapter: 0, tokens: 26, prompt: 1933 },
        { at: 2498, kind: 'request', node: 0, adapter: 4, tokens: 26, prompt: 1250 },
        { at: 2816, kind: 'request', node: 0, adapter: 0, tokens: 37, prompt: 1800 },
        { at: 2879, kind: 'request', node: 0, adapter: -1, tokens: 55, prompt: 1822 },
        { at: 3404, kind: 'request', node: 0, adapter: 6, tokens: 46, prompt: 1278 },
        { at: 4071, kind: 'request', node: 0, adapter: 4, tokens: 52, prompt: 1060 },
        { at: 4212, kind: 'request', node: 0, adapter: 4, tokens: 57, prompt: 1602 },
        { at: 4268, kind: 'request', node: 0, adapter: -1, tokens: 28, prompt: 1715 },
        { at: 4324, kind: 'request', node: 0, adapter: 6, tokens: 21, prompt: 1583 },
        { at: 4327, kind: 'request', node: 0, adapter: 6, tokens: 59, prompt: 1472 },
      ],
    );
  }, 30_000);
});

describe('a failed load is not tried again within the backoff: unless its sender then read it listed', () => {
  // Seed 436555 (--keep 2,3,4,5,8,9,11,14; drawn with the overload shapes, `--no-overload` draws another
  // schedule): node 0's load of `team` on replica-2 (sent at 832 ms) lands at 2,334 ms. Redis,
  // restarted empty at 1,949 ms, is down until 2,474: node 1, deciding alone, sends the same load at
  // 2,197 ms, and replica-2, failing its next loads from 1,665 ms, answers it 500 (an engine failure) at
  // 3,697 ms. Node 1 reads /v1/models at once, finds `team` listed and takes its load as landed
  // (docs/reliability.md, "A load whose answer is lost is the replica's to say too"): no backoff. Its
  // request, on a fresh lease (the old one half `lease_max_age_ms` old), loads it again at 3,714 ms and is
  // answered "already loaded". The check took the 500 for a failure the router backs off from.
  it('seed 436555: a failed load its sender then read listed on the replica starts no backoff', async () => {
    await holds(
      436555,
      {
        nodes: 3,
        replicas: 3,
        maxLoadedAdapters: 1,
        adapters: ['sql', 'chat', 'team,a', 'team', 'a'],
        loadMs: 1500,
        decodeMsPerStep: 100,
        coldLoadsPerMinute: 1000,
        leaseMaxAgeMs: 4000,
        ttftSloMs: 0,
        spanMs: 2000,
        queueTimeoutMs: 4000,
        upstreamTimeoutMs: 5000,
        nodeTtlMs: 500,
        sloClasses: [
          { name: 'interactive', ttft_ms: 1000, priority: 0 },
          { name: 'batch', ttft_ms: 2500, priority: -1 },
        ],
      },
      [
        { at: 810, kind: 'request', node: 0, adapter: 3, tokens: 5, prompt: 1566, cls: 'interactive' },
        { at: 1018, kind: 'request', node: 1, adapter: 1, tokens: 5, prompt: 753, cls: 'batch' },
        { at: 1137, kind: 'request', node: 2, adapter: 4, tokens: 4, prompt: 160, cls: 'batch' },
        { at: 1147, kind: 'request', node: 2, adapter: 2, tokens: 3, prompt: 508, cls: 'interactive' },
        { at: 1440, kind: 'request', node: 1, adapter: 3, tokens: 3, prompt: 739, cls: 'batch' },
        { at: 1459, kind: 'request', node: 0, adapter: -1, tokens: 3, prompt: 1141, cls: 'interactive' },
        { at: 1665, kind: 'load-fail', replica: 2, count: 4, failure: 'engine' },
        { at: 1949, kind: 'redis-restart', empty: true, downMs: 525 },
      ],
    );
  }, 30_000);
});
