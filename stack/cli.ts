import { statSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { readTrace } from '../sim/workload/workload';
import type { FleetStatus } from '../src/status/status';
import { servedExamples } from './hints';
import { routerConfig } from './kong-config';
import { LocalStack } from './stack';
import { progressLine, runTraffic, summaryTable } from './traffic';

const HELP = `Usage: npm start -- [options]      (npm run demo = npm start -- --traffic)

Starts the local stack: a simulated fleet, the real kong-js-pluginserver with lora-router and
lora-poller, and a gateway on --port that plays Kong's proxy path for kong.yml.

  --port N           gateway port (default 8000)
  --host H           gateway address (default 127.0.0.1)
  --fleet-port N     first port of the simulated replicas (default 8100; 0 = any free ports)
  --config FILE      decK file (default kong.yml)
  --replicas LIST    your own replicas instead of the simulator, comma-separated: URL (backend
                     probed), vllm=URL or llamacpp=URL; "config" = the replicas --config names
  --base-model ID    with --replicas: the base model (default: asked of the first replica)
  --time-scale X     run modelled time X times faster (default 1)
  --traffic          send a bounded demo workload, print progress and a summary, keep serving
  --requests N       demo requests (default 300)
  --duration S       demo time bound in seconds (default 120)
  --rate R           demo arrivals per second (default: the Azure trace's 5.5)
  --alpha A          Zipf exponent of the adapter mix (default 1.0)
  --trace FILE       replay a CSV in the Azure LLM trace format instead of the synthetic workload
  --seed N           demo seed (default 1)
  --exit             stop after the demo (with --traffic)
  --verbose          show the plugin server's log
  -h, --help`;

async function main(): Promise<void> {
  const { values: v } = parseArgs({
    options: {
      port: { type: 'string' },
      host: { type: 'string' },
      'fleet-port': { type: 'string' },
      config: { type: 'string' },
      replicas: { type: 'string' },
      'base-model': { type: 'string' },
      'time-scale': { type: 'string' },
      traffic: { type: 'boolean' },
      requests: { type: 'string' },
      duration: { type: 'string' },
      rate: { type: 'string' },
      alpha: { type: 'string' },
      trace: { type: 'string' },
      seed: { type: 'string' },
      exit: { type: 'boolean' },
      verbose: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (v.help) return void console.log(HELP);
  // A signal while the stack starts stops it once up (it cleans up its own failed start).
  let stopRequested = false;
  let onStop = () => void (stopRequested = true);
  // SIGHUP: the terminal closed. Default handling would end node at once, leaving the plugin
  // server's prefix folder and the replicas' ports behind.
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(signal, () => onStop());

  // Every argument is checked before anything starts.
  // The demo's hit rate counts the simulator's loads, which the user's replicas do not report here.
  if (v.traffic && v.replicas)
    throw new Error('--traffic runs against the simulated fleet only, not with --replicas');
  for (const name of ['requests', 'duration', 'rate', 'alpha', 'trace', 'seed', 'exit'] as const)
    if (v[name] !== undefined && !v.traffic) throw new Error(`--${name} applies to the demo: add --traffic`);
  const num = (name: string, s: string | undefined, d: number) => {
    if (s === undefined) return d;
    const n = Number(s);
    if (!Number.isFinite(n) || n < 0) throw new Error(`--${name} must be a non-negative number, got "${s}"`);
    return n;
  };
  // 0 arrivals a second would be no demo at all (and was read as "the trace's own rate").
  if (v.rate !== undefined && !(num('rate', v.rate, 0) > 0))
    throw new Error(`--rate must be a positive number, got "${v.rate}"`);
  const demo = {
    requests: num('requests', v.requests, 300),
    durationS: num('duration', v.duration, 120),
    ratePerS: v.rate === undefined ? undefined : num('rate', v.rate, 5.5),
    alpha: num('alpha', v.alpha, 1),
    seed: num('seed', v.seed, 1),
    trace: v.trace === undefined ? undefined : traceOf(v.trace),
  };
  const root = join(__dirname, '..', '..');
  const kongYaml = readableFile('config', v.config ?? join(root, 'kong.yml'));
  const port = num('port', v.port, 8000);
  const fleetPort = num('fleet-port', v['fleet-port'], 8100);
  const timeScale = num('time-scale', v['time-scale'], 1) || 1;
  const stack = (started = await LocalStack.start({
    port,
    host: v.host ?? '127.0.0.1',
    fleetPort,
    kongYaml,
    replicas:
      v.replicas === undefined
        ? undefined
        : v.replicas === 'config'
          ? 'config'
          : v.replicas.split(',').filter(Boolean),
    baseModel: v['base-model'],
    timeScale,
    log: (line) => {
      // The stack's own notes always; the plugin server's log with --verbose, or its errors.
      if (v.verbose || !line.startsWith('[plugin-server]') || / error: /.test(line)) console.error(line);
    },
  }));
  const status = stack.statusPath ?? '/lora';
  const watch = watchReplicas(`${stack.url}${status}/status`, (line) => console.log(line));
  let stopping = false;
  const stop = async (code = 0) => {
    if (stopping) return;
    stopping = true;
    console.log('\nstopping…');
    clearInterval(watch);
    await stack.stop();
    process.exit(code);
  };
  onStop = () => void stop();
  if (stopRequested) return stop();

  const u = stack.url;
  const fleetService = stack.services.find((s) => routerConfig(s))!;
  const cfg = routerConfig(fleetService)!;
  const listed = ((cfg.adapters as { name: string }[] | undefined) ?? []).map((a) => a.name);
  const examples = await servedExamples(cfg, stack.replicas);
  const curl = (model: string) =>
    `  curl -s ${u}/v1/chat/completions -H 'content-type: application/json' -d '{"model":"${model}","messages":[{"role":"user","content":"hi"}]}'\n`;
  console.log(`kong-lora-router local stack: a development harness, not Kong.
  gateway      ${u}  (Kong's proxy path for ${stack.services.map((s) => s.name).join(', ')}, from kong.yml)
  plugins run  lora-router, lora-poller in the real plugin server (kong-pdk's, wrapped: kong-lora-pluginserver; dist/plugins)
  not run      ${stack.notRun.join(', ') || 'none'} (bundled Kong plugins: real Kong runs them)
  fleet        ${stack.replicas.map((r) => `${r.backend} ${r.url}`).join('\n               ')}${stack.fleet ? '' : '\n               (your replicas: adapters are loaded and unloaded on them for real)'}
  placement    ${u}${status}   (JSON: ${status}/status, metrics: ${status}/metrics)

Try:
${[examples.base, examples.onDemand, examples.resident].flatMap((m) => (m ? [curl(m)] : [])).join('')}
Ctrl-C stops everything.`);

  if (v.traffic) {
    const templated = Array.from({ length: 12 }, (_, i) => `cust-${String(i + 1).padStart(2, '0')}`);
    const adapters = [...listed, ...templated];
    const tty = process.stderr.isTTY;
    console.log(
      `\ndemo traffic: ${demo.requests} requests at most, ${demo.durationS} s at most, Zipf(${demo.alpha}) over ${adapters.length} adapters, ${v.trace ? `trace ${v.trace}` : 'synthetic workload fitted to the Azure 2023 conversation trace'}`,
    );
    const s = await runTraffic({
      gatewayUrl: u,
      adapters,
      ...demo,
      maxPromptTokens: 2000,
      maxOutputTokens: 128,
      maxInFlight: 64,
      loads: () => stack.loads(),
      // A terminal gets a line redrawn each second; a log (Kong's, a CI job's) a line every few.
      progressEveryMs: tty ? 1000 : 5000,
      onProgress: (p) =>
        tty ? process.stderr.write(`\r${progressLine(p)}   `) : console.error(progressLine(p)),
    });
    if (tty) process.stderr.write('\n');
    console.log(`\n${summaryTable(s)}\n`);
    if (v.exit) await stop(s.ok > 0 ? 0 : 1);
    console.log(`demo done. The stack keeps serving on ${u} (Ctrl-C stops it; --exit stops after the demo).`);
  }
}

/** Prints a replica going down or coming back, from the poller's view (the status route). */
function watchReplicas(statusUrl: string, print: (line: string) => void): NodeJS.Timeout {
  const last = new Map<string, string>();
  let busy = false;
  const timer = setInterval(() => {
    if (busy) return;
    busy = true;
    fetch(statusUrl, { signal: AbortSignal.timeout(2000) })
      .then((r) => r.json() as Promise<FleetStatus>)
      .then((s) => {
        for (const r of s.replicas) {
          const before = last.get(r.url);
          last.set(r.url, r.health);
          if (r.health === 'down' && before !== 'down')
            print(`replica ${r.url} is down${r.lastError ? `: ${r.lastError}` : ''}`);
          else if (r.health === 'up' && before === 'down') print(`replica ${r.url} is back up`);
        }
      })
      .catch(() => undefined)
      .finally(() => (busy = false));
  }, 1000);
  timer.unref();
  return timer;
}

/** A file argument's path, once it names an existing file (reading it may still fail, with its path). */
function readableFile(name: string, path: string): string {
  const st = statSync(path, { throwIfNoEntry: false });
  if (!st) throw new Error(`--${name}: no such file: ${path}`);
  if (!st.isFile()) throw new Error(`--${name}: not a file: ${path}`);
  return path;
}

/** The demo's arrivals from a `--trace` file, read in full before anything starts. */
function traceOf(path: string) {
  try {
    return readTrace(readableFile('trace', path));
  } catch (err) {
    throw new Error((err as Error).message.replace(/^(--trace: )?/, '--trace: '));
  }
}

/** The stack once up: a failure after that stops it (plugin server, prefix folder, fleet) first. */
let started: LocalStack | undefined;

main().catch(async (err: Error) => {
  console.error(`npm start: ${err.message}`);
  await started?.stop().catch(() => undefined);
  process.exit(1);
});
