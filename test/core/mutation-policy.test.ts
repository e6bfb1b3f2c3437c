/**
 * The 503 of a wait for the adapter's own load (src/adapters/policy.ts `loadWaitRanOut`): the
 * survivor of `npm run mutation:safety -- adapters/policy` (docs/reliability/mutation-testing.md).
 */
import { isLoadWaitRanOut, loadWaitRanOut } from '../../src/adapters/policy';
import { errors } from '../../src/errors';

describe('loadWaitRanOut', () => {
  it('says the load is still under way, and is told apart from a lack of room', () => {
    const err = loadWaitRanOut('a', 'http://r1:8000');
    expect(err.message).toBe("No adapter slot for 'a': its load is still under way. Retry later.");
    expect(isLoadWaitRanOut(err)).toBe(true);
    expect(isLoadWaitRanOut(errors.noRoom('a', 'http://r1:8000', 1))).toBe(false);
  });
});
