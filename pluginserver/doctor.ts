#!/usr/bin/env node
/**
 * `kong-lora-router doctor`: the preflight check of a real fleet (docs/deployment.md,
 * "Preflight: doctor"). Reads each replica, changes nothing on it unless `--try-load` asks,
 * prints what the router will read there and what it will do without the rest. Exit status: 0
 * the fleet is fit, 1 unfit, 2 a usage error.
 */
import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { ReplicaHttp } from '../src/backends/http';
import { checkReplica } from '../src/doctor/check';
import { fleetFromKongConfig, fleetFromUrls, type DoctorTarget } from '../src/doctor/fleet-config';
import { fleetReport } from '../src/doctor/report';
import { projectVersion } from './cli';

const USAGE = `usage: kong-lora-router doctor (--replicas URL[,URL...] | --config kong.yml) [options]
  --replicas URL,...         replicas to check; write llamacpp=URL or vllm=URL to skip detection
  --config FILE              a Kong declarative configuration (YAML or JSON): every lora-router's replicas
  --max-loaded-adapters N    the router's max_loaded_adapters, with --replicas (default: not checked)
  --try-load NAME[=PATH]     load NAME on each vLLM replica, time it, unload it (the only change made)
  --timeout-ms MS            bound on each call (default 5000)
  --json                     the report as JSON
exit status: 0 fit, 1 unfit, 2 usage error`;

interface Args {
  replicas?: string;
  config?: string;
  maxLoaded?: number;
  tryLoad?: string;
  timeoutMs: number;
  json: boolean;
}

function parseArgs(argv: string[]): Args {
  const a: Args = { timeoutMs: 5000, json: false };
  if (argv[0] !== 'doctor') throw new Error(argv[0] ? `unknown command ${argv[0]}` : 'no command');
  for (let i = 1; i < argv.length; i++) {
    const flag = argv[i]!;
    const value = () => {
      const v = argv[++i];
      if (v === undefined) throw new Error(`${flag} needs a value`);
      return v;
    };
    const count = () => {
      const n = Number(value());
      if (!Number.isInteger(n) || n < 0) throw new Error(`${flag} needs a whole number`);
      return n;
    };
    if (flag === '--replicas') a.replicas = value();
    else if (flag === '--config') a.config = value();
    else if (flag === '--max-loaded-adapters') a.maxLoaded = count();
    else if (flag === '--try-load') a.tryLoad = value();
    else if (flag === '--timeout-ms') a.timeoutMs = count();
    else if (flag === '--json') a.json = true;
    else throw new Error(`unknown option ${flag}`);
  }
  if (!a.replicas === !a.config) throw new Error('give either --replicas or --config');
  return a;
}

async function main(): Promise<number> {
  const argv = process.argv.slice(2);
  if (argv.includes('--version')) {
    console.log(projectVersion());
    return 0;
  }
  if (argv.includes('--help') || argv.includes('-h')) {
    console.log(USAGE);
    return 0;
  }
  let args: Args;
  let targets: DoctorTarget[];
  let pathOf: (name: string) => string | undefined = () => undefined;
  try {
    args = parseArgs(argv);
    if (args.config) {
      const fleet = fleetFromKongConfig(parseYaml(readFileSync(args.config, 'utf8')));
      targets = fleet.targets.map((t) =>
        args.maxLoaded === undefined ? t : { ...t, maxLoadedAdapters: args.maxLoaded },
      );
      pathOf = fleet.adapterPath;
    } else targets = fleetFromUrls(args.replicas!, args.maxLoaded);
    if (targets.length === 0) throw new Error('no replica to check');
  } catch (err) {
    console.error(`kong-lora-router: ${(err as Error).message}\n${USAGE}`);
    return 2;
  }
  let tryLoad: { name: string; path: string } | undefined;
  if (args.tryLoad) {
    const [name, given] = args.tryLoad.split('=', 2) as [string, string | undefined];
    const path = given ?? pathOf(name);
    if (!path) {
      console.error(
        `kong-lora-router: --try-load ${name}: no path (write NAME=PATH, or list it in --config)`,
      );
      return 2;
    }
    tryLoad = { name, path };
  }
  const http = new ReplicaHttp({ connectionsPerReplica: 2 });
  try {
    const checks = await Promise.all(
      targets.map((t) =>
        checkReplica(http, t.url, {
          ...(t.backend ? { backend: t.backend } : {}),
          ...(t.maxLoadedAdapters === undefined ? {} : { maxLoadedAdapters: t.maxLoadedAdapters }),
          timeoutMs: args.timeoutMs,
          nowUnix: Date.now() / 1000,
          now: () => performance.now(),
          ...(tryLoad ? { tryLoad } : {}),
        }),
      ),
    );
    const report = fleetReport(checks);
    process.stdout.write(
      args.json ? JSON.stringify({ fit: report.fit, replicas: checks }, null, 2) + '\n' : report.text,
    );
    return report.fit ? 0 : 1;
  } finally {
    await http.close();
  }
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (err: Error) => {
    console.error(`kong-lora-router: ${err.stack ?? err.message}`);
    process.exitCode = 2;
  },
);
