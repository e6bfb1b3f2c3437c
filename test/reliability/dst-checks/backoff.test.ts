/**
 * The simulation's checks (dst/invariants.ts) against what docs/reliability.md promises, on "a failed
 * load is not tried again within the backoff", measured as the router measures it, and the fault layer
 * that marks a failed load its sender then read listed.
 */
import { LogChecks } from '../../../dst/invariants';
import { HttpReplicaApi } from '../../../src/backends/http-replica-api';
import { ReplicaSet, type LoadFailure } from '../../../dst/replicas';
import { Scheduler } from '../../../dst/scheduler';
import { seededRandom } from '../../../src/random';
import { LIMITS, broken } from './checks';

describe("the simulation measures a failed load's backoff on its sender's clock, as the router does", () => {
  // Seed 134920's figures: `team` failed on replica-0 for n0g0r0 at 1,288 ms, its node's clock 279 ms
  // behind; at 1,700 ms the clock stepped to 247 ms ahead, and the load was sent again at 2,011 ms:
  // 723 ms later in true time, 1,249 ms later on the node's clock (backoff_base_ms 1,000).
  const url = 'http://replica-0:8000';
  const sender = { proc: 'n0g0', sender: 'n0g0r0', alone: false };
  const failedAt = { at: 1288, clockAt: 1288 - 279 };
  const backedOff = (again: { at: number; clockAt: number }): string | undefined => {
    const loads = [
      { ...sender, url, name: 'team', at: 1286, clockAt: 1286 - 279, request: 1 },
      { ...sender, url, name: 'team', ...again, request: 2 },
    ];
    const failed = [{ url, name: 'team', sender: sender.sender, ...failedAt }];
    return broken(new LogChecks([], LIMITS, () => false, { loads, failed, backoffMs: 1000 }), 10_000);
  };

  it('a clock stepped ahead during the backoff shortens it in true time by the step (seed 134920)', () => {
    expect(backedOff({ at: 2011, clockAt: 2011 + 247 })).toBeUndefined();
  });

  it('sent again within the backoff on its own clock breaks it, however long it was in true time', () => {
    expect(backedOff({ at: 2011, clockAt: 2011 - 279 })).toBe(
      'a failed load is not tried again within the backoff',
    );
    // A clock stepped back: 1,100 ms in true time, 800 on the node's clock.
    expect(backedOff({ at: 2388, clockAt: 2388 - 579 })).toBe(
      'a failed load is not tried again within the backoff',
    );
  });
});

describe("the simulation starts a failed load's backoff when its sender hears the failure, as the router does", () => {
  // Seed 116306's figures: `sql` failed on replica-0 for n0g0r0 at 1,685 ms (an engine failure, the
  // node's clock not skewed yet); its clock stepped 161 ms back at 1,685 ms, before the answer's trip
  // back, so the router heard it at 1,687 ms, 1,526 on its clock, and backed off until 2,526. It sent
  // the load again at 2,697 ms, 2,536 on its clock: 1,010 ms after it heard (backoff_base_ms 1,000),
  // 851 ms after the answer on the clock as it was before the step.
  const url = 'http://replica-0:8000';
  const sender = { proc: 'n0g0', sender: 'n0g0r0', alone: false };
  const backedOff = (heardClockAt: number | undefined, againClockAt: number): string | undefined => {
    const loads = [
      { ...sender, url, name: 'sql', at: 885, clockAt: 885, request: 1 },
      { ...sender, url, name: 'sql', at: 2697, clockAt: againClockAt, request: 2 },
    ];
    const failed = [
      {
        url,
        name: 'sql',
        sender: sender.sender,
        at: 1685,
        clockAt: 1685,
        ...(heardClockAt === undefined ? {} : { heardClockAt }),
      },
    ];
    return broken(new LogChecks([], LIMITS, () => false, { loads, failed, backoffMs: 1000 }), 10_000);
  };

  it('a clock stepped back between the answer and its hearing moves the backoff with it (seed 116306)', () => {
    expect(backedOff(1526, 2536)).toBeUndefined();
  });

  it('sent again within the backoff from its hearing breaks it; unheard, from the answer', () => {
    expect(backedOff(1526, 2525)).toBe('a failed load is not tried again within the backoff');
    expect(backedOff(undefined, 2536)).toBe('a failed load is not tried again within the backoff');
  });
});

describe('the simulation starts no backoff for a failed load its sender then read listed, as the router does', () => {
  // Seed 436555's figures (--keep 2,3,4,5,8,9,11,14): node 0's load of `team` on replica-2 (sent at 832 ms)
  // lands there at 2,334 ms; node 1, deciding alone, sent the same load at 2,197 ms, which
  // replica-2 answers 500 (an engine failure) at 3,697 ms. Node 1 reads the replica's /v1/models at
  // once, finds `team` listed, and takes its load as landed (docs/reliability.md, "A load whose answer
  // is lost is the replica's to say too"): no backoff. Its request, on a fresh lease, loads it again
  // at 3,714 ms (answered "already loaded").
  const url = 'http://replica-2:8000';
  const sender = { proc: 'n1g0', sender: 'n1g0r0', alone: false };
  const backedOff = (listedAfter: boolean | undefined): string | undefined => {
    const loads = [
      { ...sender, url, name: 'team', at: 2197, clockAt: 2197, request: 5 },
      { ...sender, url, name: 'team', at: 3714, clockAt: 3714, request: 5 },
    ];
    const failed = [
      {
        url,
        name: 'team',
        sender: sender.sender,
        at: 3697,
        clockAt: 3697,
        heardClockAt: 3697,
        ...(listedAfter === undefined ? {} : { listedAfter }),
      },
    ];
    return broken(new LogChecks([], LIMITS, () => false, { loads, failed, backoffMs: 1000 }), 10_000);
  };

  it('a failure its sender then read listed on the replica is a landed load: no backoff (seed 436555)', () => {
    expect(backedOff(true)).toBeUndefined();
  });

  it('read not listed, or never read, it backs off as before', () => {
    expect(backedOff(false)).toBe('a failed load is not tried again within the backoff');
    expect(backedOff(undefined)).toBe('a failed load is not tried again within the backoff');
  });
});

describe("the fault layer marks a failed load listed by its sender's first registry read after it", () => {
  // One replica, a load of `chat` failed by the fault layer (an engine failure), then /v1/models read:
  // what the router does after a failed load call (ReplicaWord.listedAfterLoad).
  const failedThenRead = async (loadedBefore: boolean, reader: string, failure: LoadFailure = 'engine') => {
    const sched = new Scheduler(seededRandom(7));
    const set = new ReplicaSet(sched, { replicas: 1, maxLoras: 4, loadMs: 100, decodeMsPerStep: 10 });
    const url = set.urls[0]!;
    const api = (sender: string) =>
      new HttpReplicaApi(set.http(sched, seededRandom(sender.length), () => true, sender));
    const [n0, n1] = [api('n0g0r0'), api('n1g0r0')];
    const read = reader === 'n1g0r0' ? n1 : n0;
    const scenario = (async () => {
      if (loadedBefore) expect(await n0.loadAdapter(url, 'chat', '/adapters/chat', 5000)).toBe('loaded');
      set.failLoads(0, 1, failure);
      await expect(n1.loadAdapter(url, 'chat', '/adapters/chat', 5000)).rejects.toThrow(
        /CUDA out of memory|No adapter found|max_lora_rank/,
      );
      expect((await read.residency(url, 1000))?.map((a) => a.name)).toEqual(loadedBefore ? ['chat'] : []);
    })();
    await sched.run(
      10_000,
      () => {},
      () => false,
    );
    await scenario;
    expect(set.failedLoads).toHaveLength(1);
    return set.failedLoads[0]!.listedAfter;
  };

  it('listed by its own sender: marked (seeds 436555, 453087)', async () => {
    expect(await failedThenRead(true, 'n1g0r0')).toBe(true);
  });

  it('not listed: marked so; read by another sender only: not marked', async () => {
    expect(await failedThenRead(false, 'n1g0r0')).toBe(false);
    expect(await failedThenRead(true, 'n0g0r0')).toBeUndefined();
  });

  it("a 404 or a rank refusal is the adapter's own: the router reads nothing after it, a later read marks nothing", async () => {
    expect(await failedThenRead(true, 'n1g0r0', 'not-found')).toBeUndefined();
    expect(await failedThenRead(true, 'n1g0r0', 'rank')).toBeUndefined();
  });
});
