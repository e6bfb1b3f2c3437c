/**
 * A fault-run world whose node fails to start leaves nothing running: a listening proxy or a
 * plugin server kept jest alive for 40 minutes after such a failure (a plugin server that could
 * not start while `dist/` was being rebuilt).
 */
import { ChaosWorld } from '../../chaos/world';
import { WORLD } from '../../chaos/run';

/** Node's live handles (sockets, servers, child processes, timers with refs): what keeps jest alive. */
const handles = () => (process as unknown as { _getActiveHandles(): unknown[] })._getActiveHandles().length;

const tick = () => new Promise((r) => setTimeout(r, 20));

/**
 * The count once it holds still for 100 ms (at most 3 s): the suite before this one in the same
 * worker may still be closing sockets and children, which made `before` too high (CI: 13 before,
 * 1 after).
 */
async function settledHandles(): Promise<number> {
  let n = handles();
  for (let i = 0, still = 0; i < 150 && still < 5; i++) {
    await tick();
    const m = handles();
    still = m === n ? still + 1 : 0;
    n = m;
  }
  return n;
}

it('stops every part it started when a node cannot start', async () => {
  const before = await settledHandles();
  await expect(ChaosWorld.start({ ...WORLD, pluginsDir: '/nonexistent-plugins' })).rejects.toThrow(
    /plugin server/,
  );
  // Closed sockets leave the handle list on the next turns of the event loop.
  for (let i = 0; i < 50 && handles() > before; i++) await tick();
  expect(handles()).toBe(before);
}, 60_000);
