/**
 * A request's lease is given back, and taken, only through its handle (src/lease.ts): no file
 * of what Kong runs calls a fleet store's lease operations itself. The stores (src/fleet/) are
 * where those operations live: the failover store moves leases between its local and shared
 * parts, and replays releases, as part of one store operation.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

const ROOT = join(__dirname, '..', '..');
/** A call of a store's lease operation: `rt.store.release(`, `store.acquire(`, `this.local.release(`... */
const STORE_LEASE_CALL = /\b(store|local|shared)\??\.(acquire|release|expireLeases)\(/;
const ALLOWED = (file: string) => file === 'src/lease.ts' || file.startsWith('src/fleet/');

function sources(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return sources(path);
    return e.name.endsWith('.ts') ? [path] : [];
  });
}

/** `file:line: text` for each call of a store's lease operation outside the lease module and the stores. */
function leaseCallsOutsideHandle(files: { file: string; text: string }[]): string[] {
  return files.flatMap(({ file, text }) =>
    ALLOWED(file)
      ? []
      : text
          .split('\n')
          .flatMap((line, i) => (STORE_LEASE_CALL.test(line) ? [`${file}:${i + 1}: ${line.trim()}`] : [])),
  );
}

it('finds a direct store release where one is written', () => {
  const probe = { file: 'src/router/probe.ts', text: 'await rt.store.release(id, rt.clock.now(), 200);' };
  expect(leaseCallsOutsideHandle([probe])).toEqual([`src/router/probe.ts:1: ${probe.text}`]);
});

it('no code path of src/, plugins/ or pluginserver/ takes or gives back a lease except through its handle', () => {
  const files = ['src', 'plugins', 'pluginserver']
    .flatMap(sources)
    .map((file) => ({ file, text: readFileSync(join(ROOT, file), 'utf8') }));
  expect(files.length).toBeGreaterThan(50);
  expect(leaseCallsOutsideHandle(files)).toEqual([]);
});
