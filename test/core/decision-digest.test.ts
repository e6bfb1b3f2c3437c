import { createHash } from 'node:crypto';
import { variedBed } from '../../bench/varied-fleet';

/**
 * The scheduler decides exactly as it did at b0f2ae1, before the request path was made cheaper
 * (docs/benchmarks.md, "where the time goes"): seeded fleets that differ replica by replica and
 * move between decisions (bench/varied-fleet.ts), under both saturation rules. Each decision's
 * replica, stage, filter trail, every candidate's score and, predicted, every prediction's
 * figures enter the digest; the expected digests were computed on b0f2ae1's build. A change that
 * moves any of them on purpose (a routing change, not a speed-up) records the new digest here.
 */
const CASES: [
  mode: 'count' | 'predicted',
  replicas: number,
  adapters: number,
  seed: number,
  digest: string,
][] = [
  ['predicted', 64, 2000, 1, 'b1f92e2b90411bc4'],
  ['predicted', 16, 300, 2, 'f7da5f3957f954ff'],
  ['predicted', 5, 40, 3, '8ef22b3be52b08ec'],
  ['count', 64, 2000, 1, '7d7780d0b9589798'],
  ['count', 16, 300, 2, '9de326a55f479d50'],
  ['count', 5, 40, 3, 'b4c192a1d667fcc2'],
];

describe('decisions on seeded fleets are those of b0f2ae1', () => {
  it.each(CASES)('%s, %i replicas x %i adapters, seed %i', async (mode, replicas, adapters, seed, digest) => {
    const bed = await variedBed(replicas, adapters, seed, mode);
    const hash = createHash('sha256');
    for (let i = 0; i < 1500; i++) hash.update(await bed.decide(i));
    expect(hash.digest('hex').slice(0, 16)).toBe(digest);
  });
});
