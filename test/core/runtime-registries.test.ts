/**
 * What a runtime hands its successor of the router configurations registered with it (a `redis`
 * record change): each registry in the order it was registered, so the newest configuration still
 * takes precedence where the first that answers wins (a llama.cpp start-up adapter's name).
 */
import { silentLogger } from '../../src/log';
import { FleetRuntime } from '../../src/runtime';

const runtime = () => new FleetRuntime({ log: silentLogger, seed: 1 });

it('keeps the newest configuration first after a record change', async () => {
  const old = runtime();
  const next = runtime();
  const path = '/models/team-a.gguf';
  old.registerNames('older', (p) => (p === path ? 'from-older' : undefined));
  old.registerNames('newer', (p) => (p === path ? 'from-newer' : undefined));
  expect(old.adapterName(path)).toBe('from-newer');
  try {
    await old.retire(next);
    expect(next.adapterName(path)).toBe('from-newer');
  } finally {
    old.stop();
    next.stop();
  }
});
