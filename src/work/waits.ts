/**
 * The waits a request sent to a replica now would meet before its prefill starts: for KV room and
 * for a running slot. Apart from the model (work-model.ts) because they are the part of a
 * prediction that reads the requests already there one by one, and run per replica per decision.
 */
import { advance, endAt, type ReplicaState } from './replica-state';

/**
 * How long a request needing `need` KV tokens waits for room on `r`: until enough of the
 * requests there end (prefill, then their max tokens at the decode rate), taken in admission
 * order (FIFO: no sort per candidate, which a decision over 64 replicas cannot afford). 0 when
 * it fits or the capacity is unknown.
 */
export function kvWait(r: ReplicaState, now: number, need: number, decodeMsPerToken: number): number {
  const cap = r.kvCapacity;
  if (cap === undefined || need > cap) return 0;
  let toFree = Math.max(r.kvReserved, r.impliedKv) + need - cap;
  if (toFree <= 0) return 0;
  advance(r, now);
  let last = now;
  for (let e = r.entries.oldest; e !== undefined; e = e.younger) {
    last = Math.max(last, endAt(r, e, now, decodeMsPerToken));
    toFree -= e.kv;
    if (toFree <= 0) break;
  }
  return last - now;
}

/**
 * How long a request sent to `r` now waits for a running slot: when the last scrape reported
 * a queue (slots, KV or the adapters a batch may mix are full), the requests waiting then, plus
 * ours admitted since (less ours ended), go first; it starts when that many and one more of
 * the requests there have ended, taken in admission order as `kvWait` does. The prefill and
 * KV figures miss this wait when decodes hold every slot (short prompts, long answers: vLLM's
 * `max_num_seqs`). Past the requests of ours (another gateway's queue), each further one
 * is a typical request's decode (`meanMaxTokens` tokens) over the slots the replica reported
 * running. 0 when the replica reported no queue.
 */
export function slotWait(
  r: ReplicaState,
  now: number,
  meanMaxTokens: number,
  decodeMsPerToken: number,
): number {
  if (r.scrapedWaiting <= 0) return 0;
  advance(r, now);
  let k = Math.max(1, r.scrapedWaiting + r.sinceScrape + 1);
  let end = now;
  for (let e = r.entries.oldest; e !== undefined; e = e.younger) {
    end = Math.max(now, endAt(r, e, now, decodeMsPerToken));
    if (--k === 0) return end - now;
  }
  const perRequest = (meanMaxTokens * decodeMsPerToken) / Math.max(1, r.scrapedRunning);
  return end + k * perRequest - now;
}
