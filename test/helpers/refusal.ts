import { RouterError } from '../../src/errors';

/** The RouterError `f` throws (none: undefined); any other error is rethrown. */
export function refusal(f: () => void): RouterError | undefined {
  try {
    f();
  } catch (e) {
    if (e instanceof RouterError) return e;
    throw e;
  }
  return undefined;
}
