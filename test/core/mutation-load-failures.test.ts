/**
 * Unit test of load-failures (src/adapters/load-failures.ts, one module), written against the
 * survivors of its mutation run (docs/reliability/mutation-testing.md): what a client may read of
 * a failed load names no path or address (the rank check's own words, else fixed texts).
 */
import { BackendError } from '../../src/backends/errors';
import { AdapterNotFoundError } from '../../src/backends/replica-api';
import { clientReason, rejectionReason } from '../../src/adapters/load-failures';

describe('load-failures', () => {
  it("keeps the rank check's own words only, never the rest of the replica's text", () => {
    expect(rejectionReason('/models/x: LoRA rank 64 is greater than max_lora_rank 16. at /models/x')).toBe(
      'LoRA rank 64 is greater than max_lora_rank 16',
    );
    expect(rejectionReason('Invalid path /srv/secret/adapter')).toBe('the replica refused it (400)');
    expect(rejectionReason('LoRA rank x is greater than max_lora_rank 16')).toBe(
      'the replica refused it (400)',
    );
  });

  it('gives fixed texts for each failure, never the error message', () => {
    const secret = 'http://10.0.0.7:8000 /srv/secret/adapter';
    expect(clientReason(new AdapterNotFoundError(`No adapter found for ${secret}`))).toBe(
      'the replica has no such adapter',
    );
    expect(clientReason(new BackendError('timeout', secret))).toBe('the replica did not answer in time');
    expect(clientReason(new BackendError('connect', secret))).toBe('the replica could not be reached');
    expect(clientReason(new BackendError('http', secret, 500))).toBe('the replica answered 500');
    expect(clientReason(new BackendError('http', secret))).toBe('the replica answered an error');
    expect(clientReason(new BackendError('bad_response' as never, secret))).toBe(
      'the replica answered something the router cannot read',
    );
    expect(clientReason(new Error(secret))).toBe('internal error');
  });
});
