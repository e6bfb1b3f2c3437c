import { fnv1a } from '../../src/scheduler/prefix-index';
import { KV_BLOCK_TOKENS } from './engine';

/** A stretch of a prompt that other prompts may share, `tokens` long, named by `key`. */
export interface PromptSegment {
  /** Names this stretch and every one before it (a conversation's turn k follows its turns < k). */
  key: string;
  tokens: number;
}

/**
 * The keys of a prompt's full KV blocks (`EngineRequest.blocks`) from its shared leading
 * segments: a block is named by the segment its last token falls in and its index, so two
 * prompts opening with the same segments share those blocks' keys. Tokens past the segments
 * are the prompt's own (`own` names them).
 */
export function segmentBlocks(
  segments: readonly PromptSegment[],
  promptTokens: number,
  own: string,
): string[] {
  const out: string[] = [];
  let seg = 0;
  let segEnd = segments[0]?.tokens ?? 0;
  for (let b = 0; (b + 1) * KV_BLOCK_TOKENS <= promptTokens; b++) {
    const last = (b + 1) * KV_BLOCK_TOKENS - 1;
    while (seg < segments.length && last >= segEnd) segEnd += segments[++seg]?.tokens ?? 0;
    out.push(`${seg < segments.length ? segments[seg]!.key : own}#${b}`);
  }
  return out;
}

/**
 * The keys of a prompt's full KV blocks from its text, as the HTTP simulator counts tokens
 * (about 4 characters a token): each block of 64 characters hashed, chained with the one before,
 * as vLLM chains block hashes (`hash_block_tokens`, vllm/v1/core/kv_cache_utils.py), and
 * seeded with the adapter (a LoRA request's blocks are its own); at most the prompt's full blocks.
 */
export function textBlocks(text: string, seed: string, promptTokens: number): string[] {
  const chars = KV_BLOCK_TOKENS * 4;
  const out: string[] = [];
  const max = Math.floor(promptTokens / KV_BLOCK_TOKENS);
  let h = fnv1a(0x811c9dc5, seed, 0, seed.length);
  for (let i = 0; i + chars <= text.length && out.length < max; i += chars) {
    h = fnv1a(h, text, i, i + chars);
    out.push(h.toString(36));
  }
  return out;
}
