import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { parseRouterConfig } from '../src/config/parse';
import { silentLogger } from '../src/log';
import { RouterService } from '../src/router/router';
import { FleetRuntime } from '../src/runtime';

/**
 * One poll round of the plugin server's poller as lora-router runs it in the overhead part (one
 * vLLM replica, an adapter resident): `/metrics` and `/v1/models` over HTTP, their reading and
 * the snapshot's apply. The replica is the simulator in a process of its own, so that only the
 * poller's side is counted (CPU, allocation, callgrind's instructions). Its answers do not move
 * between rounds (no requests reach it), as on an idle replica.
 */
export async function pollRoundBed(): Promise<{
  pollRound: (i: number) => Promise<string>;
  stop: () => void;
}> {
  const sim = spawn(
    process.execPath,
    [
      join(__dirname, '..', 'sim', 'cli.js'),
      '--vllm',
      '1',
      '--lora-modules',
      'bench-adapter=/adapters/bench-adapter',
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  const url = await new Promise<string>((resolve, reject) => {
    sim.once('exit', (code) => reject(new Error(`the simulator exited (${code})`)));
    createInterface({ input: sim.stdout! }).on('line', (line) => {
      const m = /^vllm\s+(\S+)/.exec(line);
      if (m) resolve(m[1]!);
    });
  });
  sim.removeAllListeners('exit');
  const rt = new FleetRuntime({ log: silentLogger, seed: 1, poller: { intervalMs: 3_600_000 } });
  new RouterService(
    parseRouterConfig({ replicas: [{ url }], base_model: 'base', max_loaded_adapters: 4 }),
    rt,
  );
  // Registration ends in a later turn: the first rounds may find no replica yet.
  for (let k = 0; k < 100 && !rt.poller.lastLoad.has(url); k++) {
    await new Promise((r) => setTimeout(r, 10));
    await rt.poller.pollAll();
  }
  const pollRound = async () => {
    await rt.poller.pollAll();
    const load = rt.poller.lastLoad.get(url);
    if (!load) throw new Error('no reading of the replica');
    return `${load.running} ${load.waiting} ${load.kvUsage}`;
  };
  return {
    pollRound,
    stop: () => {
      rt.stop();
      sim.kill('SIGTERM');
    },
  };
}
