/**
 * The plugin server's clock-skew hook (pluginserver/clock-skew.ts) that the fault run uses: off
 * without its variable; with it, SIGUSR2 moves the node's clock ahead and back. The node's
 * clock is read where an operator sees it, lora-poller's status `now`.
 */
import { join } from 'node:path';
import { LocalGateway } from '../../stack/gateway';
import { CLOCK_SKEW_ENV, installClockSkewHook } from '../../pluginserver/clock-skew';
import { monotonic, systemClock } from '../../src/clock';
import { KongDriver, PluginServerProcess } from '../../harness/kong/driver';
import { ROOT } from '../../harness/kong/process';
import { waitFor } from '../../harness/wait';

const PLUGINS = join(ROOT, 'dist', 'plugins');

async function node(env: Record<string, string>) {
  const server = await PluginServerProcess.start({ pluginsDir: PLUGINS, env });
  const status = await LocalGateway.create({
    driver: new KongDriver(server.socketPath),
    plugins: [{ name: 'lora-poller', config: {} }],
    serviceUrl: 'http://127.0.0.1:9',
  });
  /** The node's clock minus ours, bounded by the request's own duration on both sides. */
  const offset = async (): Promise<[number, number]> => {
    const before = Date.now();
    const r = await status.handle({ method: 'GET', path: '/lora/status' });
    const after = Date.now();
    const now = (JSON.parse(r.body.toString()) as { now: number }).now;
    return [now - after, now - before];
  };
  return { server, status, offset };
}

type Node = Awaited<ReturnType<typeof node>>;
let n: Node | undefined;
afterEach(async () => {
  await n?.status.close();
  await n?.server.stop();
  n = undefined;
});

// Our clock and the node's (Unix ms at start, then monotonic) may differ by a few ms.
const SLACK = 20;
const within = ([lo, hi]: [number, number], skew: number) => lo - SLACK <= skew && skew <= hi + SLACK;

describe('plugin server clock-skew hook', () => {
  it(`with ${CLOCK_SKEW_ENV}, SIGUSR2 puts the node's clock 200 ms ahead, and a second one back`, async () => {
    n = await node({ [CLOCK_SKEW_ENV]: '200' });
    expect(within(await n.offset(), 0)).toBe(true);
    n.server.child.kill('SIGUSR2');
    await waitFor(() => n!.server.log.some((l) => /clock skew 200 ms/.test(l)), 5000, 'skew on');
    expect(within(await n.offset(), 200)).toBe(true);
    n.server.child.kill('SIGUSR2');
    await waitFor(() => n!.server.log.some((l) => /clock skew 0 ms/.test(l)), 5000, 'skew off');
    expect(within(await n.offset(), 0)).toBe(true);
  });

  it('without the variable installs nothing: SIGUSR2 is not handled (it ends the process)', async () => {
    n = await node({});
    expect(within(await n.offset(), 0)).toBe(true);
    n.server.child.kill('SIGUSR2');
    await waitFor(() => n!.server.exited, 5000, 'exit on an unhandled SIGUSR2');
  });
});

describe('the clock-skew hook with a value that is not a number', () => {
  it('patches nothing and does not throw, so the plugin server still starts', () => {
    const before = systemClock.now;
    expect(installClockSkewHook({ [CLOCK_SKEW_ENV]: 'ten' })).toBe(false);
    expect(systemClock.now).toBe(before);
  });
});

describe('the clock-skew hook and the monotonic time line', () => {
  it('steps the wall clock only: durations on the monotonic line (the unseen hold, a word age) do not jump', () => {
    const before = process.listeners('SIGUSR2');
    try {
      expect(installClockSkewHook({ [CLOCK_SKEW_ENV]: '-5000' })).toBe(true);
      const [wall, mono] = [systemClock.now(), monotonic(systemClock)];
      process.emit('SIGUSR2', 'SIGUSR2');
      // Stepped back 5 s, as a corrected node clock is; the monotonic line went on (a few ms).
      expect(systemClock.now() - wall).toBeLessThan(-4000);
      expect(monotonic(systemClock) - mono).toBeGreaterThanOrEqual(0);
      expect(monotonic(systemClock) - mono).toBeLessThan(1000);
    } finally {
      for (const l of process.listeners('SIGUSR2')) if (!before.includes(l)) process.off('SIGUSR2', l);
      delete (systemClock as { now?: unknown }).now;
    }
  });
});
