import { silentLogger } from '../../src/log';
import type { ReplicaLoad } from '../../src/metrics/replica-load';
import { FleetRuntime } from '../../src/runtime';

/** A replica's `/metrics` reading with `active` running (the unseen hold's suites). */
export const busyReading = (active: string[]): ReplicaLoad => ({
  running: active.length,
  waiting: 0,
  activeAdapters: active,
  malformedLines: 0,
  reportsActivity: true,
});

/**
 * A runtime (in-process store) with `adapter` loaded on `url` 10 s ago, and the unseen holds its
 * judge starts (`held`, the replica word's `holdUnseen` spied: restore with jest.restoreAllMocks).
 */
export async function residentWatched(
  url: string,
  adapter: string,
): Promise<{ rt: FleetRuntime; held: string[] }> {
  const rt = new FleetRuntime({ log: silentLogger });
  await rt.store.upsertReplica({ url, backend: 'vllm', priority: 0 });
  const before = rt.clock.now() - 10_000;
  const f = await rt.store.beginLoad(url, adapter, before, 10, 10_000);
  expect(await rt.store.finishLoad(url, adapter, f!, true, before + 1)).toBe(true);
  const held: string[] = [];
  jest.spyOn(rt.manager.replicaWord, 'holdUnseen').mockImplementation((_url, name) => void held.push(name));
  return { rt, held };
}
