import { Agent, request } from 'undici';
import { seededRandom } from '../src/random';
import { atRate, syntheticWorkload, type Arrival } from '../sim/workload/workload';
import { percentile as pct } from '../sim/workload/percentile';
import { zipfSampler } from '../sim/workload/zipf';

export interface TrafficOptions {
  gatewayUrl: string;
  /** Adapter names, most popular first (Zipf rank order). */
  adapters: string[];
  requests: number;
  /** Hard bound on the run, seconds: no request starts after it. */
  durationS: number;
  /** Average arrival rate; default the workload's own. */
  ratePerS?: number;
  alpha: number;
  seed: number;
  /** Replay these arrivals (an Azure-format trace, read by `readTrace`) instead of the synthetic workload. */
  trace?: Arrival[];
  /** Token counts are capped so one request stays short on the simulator. */
  maxPromptTokens: number;
  maxOutputTokens: number;
  /** Requests in flight at most; arrivals beyond it wait (a closed loop past this bound). */
  maxInFlight: number;
  /** Adapter loads so far (from the fleet), for the hit rate. */
  loads: () => number;
  onProgress?: (s: TrafficStats) => void;
  /** How often `onProgress` is told (default every second). */
  progressEveryMs?: number;
}

export interface TrafficStats {
  sent: number;
  done: number;
  ok: number;
  errors: Record<string, number>;
  loads: number;
  /** 1 - loads / served requests (a refused request never loads, so it is no hit). */
  hitRate: number;
  ttftMs: { p50: number; p90: number; p99: number };
  e2eMs: { p50: number; p99: number };
  elapsedS: number;
  throughput: number;
}

/** Sends a bounded, seeded workload through the gateway as streaming chat requests. */
export async function runTraffic(o: TrafficOptions): Promise<TrafficStats> {
  const base = o.trace ? o.trace.slice(0, o.requests) : syntheticWorkload(o.requests, o.seed);
  const arrivals: Arrival[] = o.ratePerS ? atRate(base, o.ratePerS) : base;
  const pick = zipfSampler(o.adapters.length, o.alpha, seededRandom(o.seed + 1));
  const agent = new Agent({ connections: o.maxInFlight, keepAliveTimeout: 10_000 });
  const loads0 = o.loads();
  const ttft: number[] = [];
  const e2e: number[] = [];
  const errors: Record<string, number> = {};
  let sent = 0;
  let done = 0;
  let ok = 0;
  let inFlight = 0;
  const t0 = Date.now();
  const deadline = t0 + o.durationS * 1000;
  const stats = (): TrafficStats => {
    const loads = o.loads() - loads0;
    const elapsedS = (Date.now() - t0) / 1000;
    return {
      sent,
      done,
      ok,
      errors: { ...errors },
      loads,
      hitRate: ok ? Math.max(0, 1 - loads / ok) : 1,
      ttftMs: { p50: pct(ttft, 0.5), p90: pct(ttft, 0.9), p99: pct(ttft, 0.99) },
      e2eMs: { p50: pct(e2e, 0.5), p99: pct(e2e, 0.99) },
      elapsedS,
      throughput: elapsedS > 0 ? ok / elapsedS : 0,
    };
  };
  const progress = o.onProgress ? setInterval(() => o.onProgress!(stats()), o.progressEveryMs ?? 1000) : null;
  const one = async (a: Arrival): Promise<void> => {
    const model = o.adapters[pick()]!;
    const prompt = 'word '.repeat(Math.min(a.promptTokens, o.maxPromptTokens)).slice(0, -1);
    const started = Date.now();
    try {
      const res = await request(`${o.gatewayUrl}/v1/chat/completions`, {
        method: 'POST',
        dispatcher: agent,
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          model,
          messages: [{ role: 'user', content: prompt }],
          max_tokens: Math.min(a.outputTokens, o.maxOutputTokens),
          stream: true,
        }),
        headersTimeout: 120_000,
        bodyTimeout: 120_000,
      });
      if (res.statusCode !== 200) {
        errors[String(res.statusCode)] = (errors[String(res.statusCode)] ?? 0) + 1;
        await res.body.dump();
        return;
      }
      let first: number | undefined;
      let buf = '';
      for await (const chunk of res.body) {
        if (first !== undefined) continue;
        buf += chunk.toString();
        // The first event with generated text: the role-only opening chunk does not count.
        if (/"content":"[^"]/.test(buf)) first = Date.now();
      }
      ok++;
      ttft.push((first ?? Date.now()) - started);
      e2e.push(Date.now() - started);
    } catch (err) {
      const k = (err as Error & { code?: string }).code ?? 'network';
      errors[k] = (errors[k] ?? 0) + 1;
    } finally {
      done++;
    }
  };
  const running = new Set<Promise<void>>();
  for (const a of arrivals) {
    const wait = t0 + a.at - Date.now();
    if (wait > 0) await sleep(wait);
    if (Date.now() >= deadline) break;
    while (inFlight >= o.maxInFlight) await Promise.race(running);
    inFlight++;
    sent++;
    const p = one(a).finally(() => {
      inFlight--;
      running.delete(p);
    });
    running.add(p);
  }
  await Promise.all(running);
  if (progress) clearInterval(progress);
  await agent.close();
  return stats();
}

export function summaryTable(s: TrafficStats): string {
  const rows: [string, string][] = [
    ['requests sent', String(s.sent)],
    ['answered 200', String(s.ok)],
    [
      'errors',
      Object.entries(s.errors)
        .map(([k, v]) => `${k}: ${v}`)
        .join(', ') || 'none',
    ],
    ['adapter loads', String(s.loads)],
    // Nothing served, no hit rate: "100 %" of nothing reads as a result.
    ['hit rate (1 - loads / served)', s.ok ? `${(s.hitRate * 100).toFixed(1)} %` : '-'],
    ['served TTFT p50 / p90 / p99', `${fmt(s.ttftMs.p50)} / ${fmt(s.ttftMs.p90)} / ${fmt(s.ttftMs.p99)}`],
    ['served end-to-end p50 / p99', `${fmt(s.e2eMs.p50)} / ${fmt(s.e2eMs.p99)}`],
    ['throughput', `${s.throughput.toFixed(2)} req/s over ${s.elapsedS.toFixed(1)} s`],
  ];
  const w = Math.max(...rows.map((r) => r[0].length));
  return ['| metric | value |', '|---|---|', ...rows.map(([k, v]) => `| ${k.padEnd(w)} | ${v} |`)].join('\n');
}

export function progressLine(s: TrafficStats): string {
  // No hit rate before anything was answered: "100%" of nothing reads as a result.
  const hit = s.done ? `${(s.hitRate * 100).toFixed(0)}%` : '-';
  const errors = Object.values(s.errors).reduce((a, b) => a + b, 0);
  return `answered ${s.done} of ${s.sent} sent (${s.ok} ok, ${errors} errors) · adapter loads ${s.loads} · hit rate ${hit} · served TTFT p50 ${fmt(s.ttftMs.p50)}, p99 ${fmt(s.ttftMs.p99)}`;
}

function fmt(ms: number): string {
  return Number.isNaN(ms) ? '-' : ms >= 1000 ? `${(ms / 1000).toFixed(2)} s` : `${Math.round(ms)} ms`;
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
