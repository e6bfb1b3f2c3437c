/**
 * What a client may read of a failed load: the replica's own words only where they name no
 * path or address (the rank check), else fixed texts; the operator log keeps the full message.
 */
import { BackendError } from '../backends/errors';
import { AdapterNotFoundError } from '../backends/replica-api';

/**
 * What a client may read of a replica's refusal: the rank check's own words (no path in them:
 * PEFTHelper.validate_legal, vllm/lora/peft_helper.py, vLLM v0.11.0 (in worker_manager.py `_load_lora`
 * at vllm 9495bf0d33), "LoRA rank {r} is greater than max_lora_rank {m}."), else a fixed text.
 */
export function rejectionReason(message: string): string {
  return (
    /LoRA rank \d+ is greater than max_lora_rank \d+/.exec(message)?.[0] ?? 'the replica refused it (400)'
  );
}

/** Why a load failed, as a client may read it: the replica's own message, never its address. */
export function clientReason(err: unknown): string {
  // vLLM's "No adapter found for <path>" names the path: not for the client.
  if (err instanceof AdapterNotFoundError) return 'the replica has no such adapter';
  // Fixed texts: a replica's own error text can name storage paths (vLLM's load errors quote
  // the adapter's path); the operator log keeps it.
  if (err instanceof BackendError) {
    if (err.code === 'timeout') return 'the replica did not answer in time';
    if (err.code === 'connect') return 'the replica could not be reached';
    if (err.code === 'http') return `the replica answered ${err.status ?? 'an error'}`;
    return 'the replica answered something the router cannot read';
  }
  return 'internal error';
}
