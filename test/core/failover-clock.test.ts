import { VirtualClock } from '../../src/clock';
import { FailoverFleetStore } from '../../src/fleet/redis/failover-store';
import type { SharedStore } from '../../src/fleet/redis/shared-store';
import { MemoryFleetStore } from '../../src/fleet/memory-store';
import type { Logger } from '../../src/log';

const U = 'http://10.0.0.1:8000';

/** A shared store that fails every call while `down` (a unit test of the failover logic alone). */
function flakyShared(): { store: SharedStore; down: { value: boolean } } {
  const down = { value: false };
  const inner = Object.assign(new MemoryFleetStore(), { ping: async () => 'PONG' });
  const store = new Proxy(inner, {
    get(target, key, receiver) {
      const v = Reflect.get(target, key, receiver) as unknown;
      if (typeof v !== 'function') return v;
      return (...args: unknown[]) => {
        if (down.value) return Promise.reject(new Error('shared store down'));
        return (v as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
  return { store, down };
}

describe('FailoverFleetStore on an injected clock', () => {
  it('probes and measures its outage on the clock it is given, not the wall clock', async () => {
    const clock = new VirtualClock();
    const lines: string[] = [];
    const log: Logger = {
      info: (m) => lines.push(m),
      warn: (m) => lines.push(m),
      error: (m) => lines.push(m),
    };
    const { store, down } = flakyShared();
    const s = new FailoverFleetStore(store, log, { probeMs: 1000, logEveryMs: 60_000 }, clock);
    try {
      await s.upsertReplica({ url: U, backend: 'vllm', priority: 0 });
      down.value = true;
      await s.views([U]);
      expect(s.mode()).toBe('local');
      await clock.run(90_000);
      expect(s.mode()).toBe('local');
      expect(lines.some((l) => /still unavailable after 60 s/.test(l))).toBe(true);
      down.value = false;
      await clock.run(clock.now() + 1000);
      expect(s.mode()).toBe('redis');
      expect(lines.at(-1)).toMatch(/is back after 91 s/);
      // Recovered: no probe left armed.
      expect(clock.pending()).toBe(0);
    } finally {
      await s.close();
    }
  });
});
