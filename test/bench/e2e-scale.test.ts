import { scaledDefaults } from '../../bench/e2e';
import { parseRouterConfig } from '../../src/config/parse';

/**
 * The end-to-end run's router lives on the wall clock while the replicas run `timeScale` times
 * faster: its configuration must say in wall units what the simulation's says in modelled ones.
 */
describe('end-to-end router configuration at a time scale (bench/e2e.ts)', () => {
  const defaults = parseRouterConfig({ replicas: [{ url: 'http://127.0.0.1:1' }], base_model: 'base' });

  it('shortens every duration the decision weighs and speeds up every rate by the time scale', () => {
    const c = scaledDefaults(2);
    expect(c.prefill_tokens_per_second).toBe(defaults.prefill_tokens_per_second * 2);
    expect(c.saturation_margin_ms).toBe(Math.round(defaults.saturation_margin_ms / 2));
    expect(c.ttft_tolerance_ms).toBe(Math.round(defaults.ttft_tolerance_ms / 2));
    expect(c.queue_timeout_ms).toBe(Math.round(defaults.queue_timeout_ms / 2));
    // The objective a held request waits for is a duration in modelled time too.
    expect(c.ttft_slo_ms).toBe(Math.round(defaults.ttft_slo_ms / 2));
    expect(c.stale_after_ms).toBe(Math.round(defaults.stale_after_ms / 2));
    expect(c.cold_loads_per_minute).toBe(defaults.cold_loads_per_minute * 2);
  });

  it('is a configuration the schema accepts, and the identity at time scale 1', () => {
    const c = scaledDefaults(4);
    expect(() =>
      parseRouterConfig({ replicas: [{ url: 'http://127.0.0.1:1' }], base_model: 'base', ...c }),
    ).not.toThrow();
    const same = scaledDefaults(1);
    for (const [k, v] of Object.entries(same)) expect(v).toBe(defaults[k as keyof typeof defaults]);
  });
});
