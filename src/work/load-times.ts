import { Lru } from '../lru';
import { Ewma } from './ewma';

/** Adapters whose load time is remembered; the least recently loaded are forgotten first. */
const ADAPTERS = 16_384;

/**
 * What a load and an unload cost on this fleet, learned from the adapter manager's own
 * measured calls (LoadRecord): per adapter (its size decides), else the fleet's average, else
 * the prior. Only successful calls teach: a failed load says nothing about the next one.
 */
export class LoadTimes {
  private readonly perAdapter = new Lru<string, Ewma>(ADAPTERS);
  private readonly fleet: Ewma;
  private readonly unloads: Ewma;

  constructor(priorLoadMs: number, priorUnloadMs: number) {
    this.fleet = new Ewma(priorLoadMs);
    this.unloads = new Ewma(priorUnloadMs);
  }

  observe(r: { op: 'load' | 'unload'; adapter: string; ok: boolean; ms: number }): void {
    if (!r.ok || !(r.ms >= 0)) return;
    if (r.op === 'unload') return this.unloads.observe(r.ms);
    this.fleet.observe(r.ms);
    let e = this.perAdapter.get(r.adapter);
    if (!e) this.perAdapter.set(r.adapter, (e = new Ewma(r.ms, 0.3)));
    e.observe(r.ms);
  }

  load(adapter: string | undefined): number {
    const e = adapter === undefined ? undefined : this.perAdapter.get(adapter);
    return e ? e.value : this.fleet.value;
  }

  unload(): number {
    return this.unloads.value;
  }
}
