import { mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { KongDriver, KongRequest, PluginServerProcess } from '../harness/kong/driver';
import { SimFleet } from '../sim/fleet';
import { chatBody } from './overhead';

/**
 * Where the plugin server's added CPU goes: lora-router (adapter resident) against the no-op
 * plugin at 1 KB, as the overhead part runs them, each in a plugin server of its own so that each
 * has a CPU profile of its own. The requests alternate between the two (load on the shared
 * machine hits both alike); after `--warm` pairs, both start V8's sampling profiler
 * (bench/profile-preload.ts) and `--n` pairs are counted (CPU time from /proc, every thread).
 * Prints the CPU µs per access + log and a table of sampled µs per request by where the
 * sample fell; `--out DIR` keeps the .cpuprofile files (Chrome DevTools, speedscope).
 *
 *   node dist/bench/plugin-server-profile.js [--n 20000] [--warm 3000] [--out DIR] [--old DIST [--new DIST]] [--node-arg FLAG]
 *
 * `--old DIST`: another build's dist/ (a copy, with node_modules reachable from it) runs the same
 * pair in plugin servers of its own (its pluginserver/main.js and its plugin), the four servers'
 * requests interleaved, the order turned one place each round, so that the machine's load hits
 * both builds alike: before and after from one run, as ratios of CPU time. `--new DIST`: another
 * build in place of this one (a second copy of the old build: what the method's noise gives).
 * `--node-arg FLAG` (repeatable): a Node option for the first build's two servers only; with
 * `--new` and `--old` the same build, what the option alone changes (a heap size, say).
 *
 * Samples are wall time of the server's main thread, so a write the kernel preempted counts
 * whole: read the socket-write row beside the CPU figures, not as CPU.
 */
const DIST = join(__dirname, '..');
const ROOT = join(DIST, '..');

/** A sample's place, first rule that matches; `stack` is a frame list, innermost first. */
const PLACES: [string, (stack: string[]) => boolean][] = [
  ['idle (epoll)', (s) => s[0] === '(idle) '],
  ['garbage collector', (s) => s[0] === '(garbage collector) '],
  ['V8 outside JS ((program))', (s) => s[0] === '(program) '],
  [
    'socket write of replies (syscall, preemption)',
    (s) => s.some((f) => f.startsWith('reply pluginserver/socket')),
  ],
  [
    'background: replica polls (undici, timers)',
    (s) => s.some((f) => /undici|poller|http-replica-api|abort_controller|replica-load/.test(f)),
  ],
  ['microtask queue itself (await hops)', (s) => s[0] === 'runMicrotasks '],
];

/** Files grouped by what they are: the routing core by folder, the rest by package. */
function groupOf(file: string): string {
  const src = /^dist\/src\/([^/]+)\//.exec(file);
  if (src) return `routing core: src/${src[1]}/`;
  if (/^dist\/src\/[^/]+$/.test(file)) return 'routing core: src/*.ts (lease, clock, runtime...)';
  if (/^dist\/plugins\/|noop-plugin/.test(file)) return 'plugin glue (plugins/ or the no-op)';
  if (file.includes('prom-client')) return 'prom-client (metrics)';
  if (file.includes('kong-pdk')) return 'kong-pdk (PDK proxy, server)';
  if (file.includes('msgpack')) return 'msgpack';
  if (file.startsWith('dist/pluginserver/')) return 'pluginserver/ (dispatch, wrappers)';
  if (file.startsWith('node:')) return 'Node internals (streams, events, timers)';
  return `other: ${file}`;
}

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string };
  children?: number[];
}

/** Sampled µs per request of one profile, by place. */
export function placesOf(path: string, requests: number): Map<string, number> {
  const p = JSON.parse(readFileSync(path, 'utf8')) as {
    nodes: ProfileNode[];
    samples: number[];
    timeDeltas: number[];
  };
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  // Relative to the project: dist/src/..., node_modules/<package>/..., node:...
  // Another build's dist/ (`--old`, `--new`) is grouped as this one's.
  const file = (n: ProfileNode) =>
    n.callFrame.url
      .replace(/^file:\/\//, '')
      .replace(`${ROOT}/`, '')
      .replace(/^\/(?!.*\/node_modules\/).*?\/dist\//, 'dist/');
  const out = new Map<string, number>();
  for (let i = 0; i < p.samples.length; i++) {
    const frames: ProfileNode[] = [];
    for (let id: number | undefined = p.samples[i]; id !== undefined; id = parent.get(id))
      frames.push(byId.get(id)!);
    const names = frames.map((n) => `${n.callFrame.functionName} ${file(n).replace(/^dist\//, '')}`);
    let place = PLACES.find(([, test]) => test(names))?.[0];
    // A native leaf (a string decode, Date.now) counts for the nearest JavaScript that called it.
    place ??= groupOf(file(frames.find((n) => n.callFrame.url !== '') ?? frames[0]!));
    out.set(place, (out.get(place) ?? 0) + (p.timeDeltas[i + 1] ?? 0) / requests);
  }
  return out;
}

async function main(): Promise<void> {
  const { values: v } = parseArgs({
    options: {
      n: { type: 'string' },
      warm: { type: 'string' },
      out: { type: 'string' },
      old: { type: 'string' },
      new: { type: 'string' },
      'node-arg': { type: 'string', multiple: true },
    },
  });
  const n = Number(v.n ?? 20_000);
  const warm = Number(v.warm ?? 3000);
  const out = v.out ?? mkdtempSync(join(tmpdir(), 'plugin-server-profile-'));
  const fleet = await SimFleet.start([
    { staticAdapters: [{ name: 'bench-adapter', path: '/adapters/bench-adapter' }], maxModelLen: 1 << 20 },
  ]);
  const url = new URL(fleet.urls[0]!);
  // Each build's plugins from its own dist/, in a directory of their own.
  const builds = [{ label: '', dist: v.new === undefined ? DIST : resolve(v.new) }];
  if (v.old !== undefined) builds.push({ label: 'old ', dist: resolve(v.old) });
  const dirs = builds.map((b) => {
    const dir = mkdtempSync(join(tmpdir(), 'bench-plugins-'));
    symlinkSync(join(b.dist, 'plugins', 'lora-router.js'), join(dir, 'lora-router.js'));
    symlinkSync(join(b.dist, 'bench', 'noop-plugin.js'), join(dir, 'lora-noop.js'));
    return dir;
  });
  const start = async (b: number, name: 'lora-router' | 'lora-noop', config: Record<string, unknown>) => {
    const label = `${builds[b]!.label}${name}`;
    const server = await PluginServerProcess.start({
      pluginsDir: dirs[b]!,
      binary: join(builds[b]!.dist, 'pluginserver', 'main.js'),
      nodeArgs: [
        '--require',
        join(__dirname, 'profile-preload.js'),
        ...(b === 0 ? (v['node-arg'] ?? []) : []),
      ],
      env: { PROFILE_OUT: join(out, label.replace(' ', '-')) },
    });
    const driver = new KongDriver(server.socketPath);
    const { Id } = await driver.startInstance(name, config);
    const pid = server.child.pid!;
    // utime + stime of the process, clock ticks (100 a second on Linux).
    const ticks = () => {
      const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
      return Number(f[11]) + Number(f[12]);
    };
    return { name: label, profile: label.replace(' ', '-'), server, driver, Id, ticks };
  };
  const servers: Awaited<ReturnType<typeof start>>[] = [];
  for (let b = 0; b < builds.length; b++)
    servers.push(
      await start(b, 'lora-router', {
        replicas: [{ url: fleet.urls[0] }],
        base_model: 'base',
        max_loaded_adapters: 4,
      }),
      await start(b, 'lora-noop', { host: url.hostname, port: Number(url.port) }),
    );
  // Each round in turn from another server: none always runs right after another's.
  const round = async (i: number) => {
    for (let k = 0; k < servers.length; k++) await request(servers[(i + k) % servers.length]!);
  };
  const body = chatBody(1024);
  const request = async (s: (typeof servers)[number]) => {
    const req = new KongRequest({ path: '/v1/chat/completions', body });
    await s.driver.handleEvent(s.Id, 'access', req);
    req.status = 200;
    await s.driver.handleEvent(s.Id, 'log', req);
    if (req.exit) throw new Error(`${s.name} answered ${req.exit.status}: ${req.exit.body.toString()}`);
  };
  try {
    for (let i = 0; i < warm; i++) await round(i);
    for (const s of servers) s.server.child.kill('SIGUSR2');
    await new Promise((r) => setTimeout(r, 300));
    const t0 = servers.map((s) => s.ticks());
    for (let i = 0; i < n; i++) await round(i);
    const cpu = servers.map((s, k) => ((s.ticks() - t0[k]!) * 10_000) / n);
    for (const s of servers) s.driver.close();
    for (const s of servers) await s.server.stop();
    // The profile is written on SIGTERM, after stop() returned.
    await new Promise((r) => setTimeout(r, 2000));
    for (let b = 0; b < builds.length; b++) {
      const [r, o] = [cpu[2 * b]!, cpu[2 * b + 1]!];
      console.log(
        `${builds[b]!.label}CPU per 1 KB access + log (/proc, ${n} each after ${warm}): lora-router ${r.toFixed(1)} µs, ` +
          `no-op ${o.toFixed(1)} µs, added ${(r - o).toFixed(1)} µs (${(r / o).toFixed(3)}x); load average ${loadavg()[0]!.toFixed(1)}`,
      );
    }
    if (builds.length > 1)
      console.log(
        `new/old: lora-router ${(cpu[0]! / cpu[2]!).toFixed(3)}, no-op ${(cpu[1]! / cpu[3]!).toFixed(3)}, ` +
          `added ${((cpu[0]! - cpu[1]!) / (cpu[2]! - cpu[3]!)).toFixed(3)}`,
      );
    // The table: this build's pair (the first two servers).
    const [router, noop] = servers.slice(0, 2).map((s) => placesOf(join(out, s.profile, 'p.cpuprofile'), n));
    const places = [...new Set([...router!.keys(), ...noop!.keys()])].filter((p) => !p.startsWith('idle'));
    const added = (p: string) => (router!.get(p) ?? 0) - (noop!.get(p) ?? 0);
    places.sort((a, b) => added(b) - added(a));
    console.log('sampled µs per request (wall time of the main thread, not idle; this build)');
    console.log('   added  router    no-op  where');
    const row = (p: string, a: number, r: number, o: number) =>
      console.log(
        `${a.toFixed(1).padStart(8)} ${r.toFixed(1).padStart(7)} ${o.toFixed(1).padStart(8)}  ${p}`,
      );
    let [tr, to] = [0, 0];
    for (const p of places) {
      const [r, o] = [router!.get(p) ?? 0, noop!.get(p) ?? 0];
      tr += r;
      to += o;
      if (Math.abs(r - o) >= 0.5) row(p, r - o, r, o);
    }
    row('total', tr - to, tr, to);
    if (v.out !== undefined)
      console.log(`profiles: ${servers.map((s) => `${out}/${s.profile}/p.cpuprofile`).join(', ')}`);
  } finally {
    for (const s of servers) if (!s.server.exited) await s.server.stop();
    await fleet.stop();
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
    if (v.out === undefined) rmSync(out, { recursive: true, force: true });
  }
}

if (require.main === module)
  main().catch((err: Error) => {
    console.error(err.stack ?? String(err));
    process.exit(1);
  });
