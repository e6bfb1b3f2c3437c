/**
 * A TTFT predictor as good as llm-d's (its two learned models report ~5% error; llm-d blog
 * 2026-03-13): not learned, but read off the simulated engine's own state and parameters, then
 * given a 5% error. Like theirs it has no adapter input: an adapter load the request will wait for
 * (a resolver load, a host-cache miss) is not in the prediction.
 */
import type { Random } from '../../../src/random';
import type { ReplicaEngine } from '../../../sim/engine/engine';

/** Relative error of the prediction (standard deviation of a normal factor around 1). */
export const PREDICTION_ERROR = 0.05;

/**
 * TTFT (ms) a request of `prompt` + `output` tokens would see on `engine` if sent now, by the
 * engine's own model: FIFO admission as its scheduler does (running slots, KV reservations of
 * prompt + answer), running sequences ending after their tokens left at the decode step of the
 * present batch, then its own prefill and one decode step.
 */
export function engineTtft(engine: ReplicaEngine, now: number, prompt: number, output: number): number {
  const o = engine.options;
  const q = engine.queueView();
  const batch = Math.min(o.maxNumSeqs, q.running.length + q.waiting.length + 1);
  const stepMs = o.decodeMsPerStep * (1 + o.decodeSlowdownPerSeq * (batch - 1));
  let t = Math.max(now, q.stepEndsAt);
  // Running sequences as (ends at, KV held) in a min-heap on the end. An admission's prefill runs
  // inside a step, so it delays every sequence then running: `shift` adds to all their ends.
  const ends = new MinHeap();
  let shift = 0;
  for (const r of q.running) ends.push(t + r.left * stepMs, r.reserved);
  let kv = q.kvReserved;
  const queue = [...q.waiting, { prompt, output, reserved: prompt + output }];
  let admittedAt = t;
  for (const w of queue) {
    // Wait for room: a free running slot and KV for its reservation.
    while (ends.size >= o.maxNumSeqs || (kv + w.reserved > o.kvCapacityTokens && ends.size > 0)) {
      const first = ends.pop();
      t = Math.max(t, first.at + shift);
      kv -= first.kv;
    }
    admittedAt = t;
    kv += w.reserved;
    const prefill = w.prompt * o.prefillMsPerToken;
    shift += prefill;
    ends.push(t + prefill + w.output * stepMs - shift, w.reserved);
  }
  return admittedAt - now + prompt * o.prefillMsPerToken + stepMs;
}

/** `x` with a normal relative error of `sd` (Box-Muller on the seeded random). */
export function withError(x: number, random: Random, sd = PREDICTION_ERROR): number {
  const z = Math.sqrt(-2 * Math.log(random() || 1e-12)) * Math.cos(2 * Math.PI * random());
  return Math.max(0, x * (1 + sd * z));
}

/** A binary min-heap of (at, kv) on `at`. */
class MinHeap {
  private readonly at: number[] = [];
  private readonly kv: number[] = [];
  get size(): number {
    return this.at.length;
  }
  push(at: number, kv: number): void {
    let i = this.at.length;
    this.at.push(at);
    this.kv.push(kv);
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (this.at[p]! <= at) break;
      this.swap(i, p);
      i = p;
    }
  }
  pop(): { at: number; kv: number } {
    const top = { at: this.at[0]!, kv: this.kv[0]! };
    const lastAt = this.at.pop()!;
    const lastKv = this.kv.pop()!;
    if (this.at.length > 0) {
      this.at[0] = lastAt;
      this.kv[0] = lastKv;
      for (let i = 0; ; ) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < this.at.length && this.at[l]! < this.at[m]!) m = l;
        if (r < this.at.length && this.at[r]! < this.at[m]!) m = r;
        if (m === i) break;
        this.swap(i, m);
        i = m;
      }
    }
    return top;
  }
  private swap(a: number, b: number): void {
    [this.at[a], this.at[b]] = [this.at[b]!, this.at[a]!];
    [this.kv[a], this.kv[b]] = [this.kv[b]!, this.kv[a]!];
  }
}
