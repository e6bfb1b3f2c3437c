import { VLLM_SAMPLES } from '../src/metrics/replica-load';
import type { ReplicaSet } from './replicas';

/**
 * Three schedules in four: each replica's /metrics answer keeps only the samples the router
 * reads (VLLM_SAMPLES), so its parse reads a tenth of the text and gives the same figures (a
 * fault then garbles or cuts that text); the fourth reads the whole text, as vLLM writes it.
 */
export function samplesOnly(seed: number, replicas: ReplicaSet): void {
  if (seed % 4 === 0) return;
  for (const replica of replicas.replicas) {
    // The vLLM backend's metrics state (private to the simulator's replica): its text, cut as
    // it is rendered, so the answer's way (its microtasks) stays the same.
    const state = (replica as unknown as { api: { metricsState?: { text(): string } } }).api.metricsState;
    if (!state) continue;
    const text = state.text.bind(state);
    /** The last text rendered and what was kept of it (an idle replica's text repeats). */
    let last = { text: '', kept: '' };
    state.text = () => {
      const t = text();
      if (last.text !== t) last = { text: t, kept: samplesRead(t) };
      return last.kept;
    };
  }
}

/** The lines of a vLLM /metrics text whose sample the router reads (no comments). */
function samplesRead(text: string): string {
  let kept = '';
  const n = text.length;
  // The next `{` at or after where it was last looked for (n: none left): each found once.
  let brace = -1;
  for (let pos = 0; pos < n; ) {
    let end = text.indexOf('\n', pos);
    if (end < 0) end = n;
    if (end > pos && text.charCodeAt(pos) !== 35 /* # */) {
      // The name ends at the line's first `{` or space, or with the line.
      if (brace < pos) {
        const b = text.indexOf('{', pos);
        brace = b < 0 ? n : b;
      }
      let nameEnd = Math.min(brace, end);
      const space = text.indexOf(' ', pos);
      if (space >= 0 && space < nameEnd) nameEnd = space;
      if (VLLM_SAMPLES.has(text.slice(pos, nameEnd)))
        kept += end < n ? text.slice(pos, end + 1) : `${text.slice(pos, n)}\n`;
    }
    pos = end + 1;
  }
  return kept;
}
