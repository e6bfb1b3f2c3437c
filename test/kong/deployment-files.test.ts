/**
 * Docker cannot run here: these tests read kong.yml and docker/ and check that they agree
 * with the built plugins (names, schema, socket names, paths), the way Kong would read them.
 */
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { validateRecord } from '../../src/config/kong-schema';
import { ROOT } from '../../harness/kong/process';
import { DockerReplay, dockerIgnored, parseDockerfile, runReRooted, stageChain } from '../helpers/dockerfile';
import type { PluginInfo } from '../../harness/kong/driver';
import { dumpPlugins } from './world';

const read = (p: string) => readFileSync(join(ROOT, p), 'utf8');
const infos = dumpPlugins();
const schemaOf = (name: string) => infos.find((i) => i.Name === name)!.Schema.fields[0].config.fields;

function kongConf(file: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of read(file).split('\n')) {
    const m = line.match(/^\s*([a-z0-9_]+)\s*=\s*(.*?)\s*$/);
    if (m) out[m[1]!] = m[2]!;
  }
  return out;
}

const dockerfile = read('docker/Dockerfile');
/** Where the image installs the package, as `npm install -g` does with the prefix /usr/local. */
const PACKAGE_IN_IMAGE = '/usr/local/lib/node_modules/kong-lora-router';

/** Runs a kong.conf command in a replayed image; its output is `--dump-all-plugins` JSON. */
const runInImage = (image: string, command: string): PluginInfo[] =>
  JSON.parse(runReRooted(image, command.split(/\s+/), 10_000).toString());

describe('kong.yml', () => {
  const y = parse(read('kong.yml'));
  const plugins = [
    ...y.services.flatMap((s: any) => s.plugins ?? []),
    ...y.services.flatMap((s: any) => (s.routes ?? []).flatMap((r: any) => r.plugins ?? [])),
  ];

  it('is decK format 3.0 with a consumer and a key-auth credential', () => {
    expect(y._format_version).toBe('3.0');
    expect(y.consumers[0].keyauth_credentials[0].key).toBeTruthy();
  });

  it('puts key-auth, rate-limiting, lora-router and lora-poller on the fleet service, /lora a route of it', () => {
    const fleet = y.services.find((s: any) => s.plugins?.some((p: any) => p.name === 'lora-router'));
    expect(fleet.plugins.map((p: any) => p.name)).toEqual([
      'key-auth',
      'rate-limiting',
      'lora-router',
      'lora-poller',
    ]);
    const poller = fleet.plugins.find((p: any) => p.name === 'lora-poller');
    expect(fleet.routes.map((r: any) => r.paths)).toEqual([['/v1'], [poller.config.base_path]]);
  });

  it('configures our plugins with configs the dumped schemas accept (as Kong validates them)', () => {
    for (const name of ['lora-router', 'lora-poller']) {
      const p = plugins.find((x: any) => x.name === name);
      expect(() => validateRecord(schemaOf(name), p.config)).not.toThrow();
    }
  });

  it('falls back to a health-checked upstream over every replica when the plugin server is down', () => {
    const fleet = y.services.find((s: any) => s.name === 'llm-fleet');
    const upstream = y.upstreams.find((u: any) => u.name === fleet.host);
    const router = fleet.plugins.find((p: any) => p.name === 'lora-router').config;
    expect(upstream.targets.map((t: any) => t.target)).toEqual(
      router.replicas.map((r: any) => r.url.replace('http://', '')),
    );
    expect(upstream.healthchecks.active.http_path).toBe('/health');
  });

  it('streams the OpenAI route (response_buffering off) and keeps the status route behind key-auth', () => {
    const fleet = y.services.find((s: any) => s.name === 'llm-fleet');
    expect(fleet.routes.map((r: any) => r.response_buffering)).toEqual([false, undefined]);
    expect(fleet.plugins[0].name).toBe('key-auth'); // on the service: both routes
  });
});

describe('docker/kong.conf (Kong <= 3.8) and docker/kong-3.9.conf (Kong >= 3.9)', () => {
  // What these commands load is run in the replayed image below; here, how Kong reads the entries.
  it('<= 3.8: one entry serving both plugins, bodies buffered up to 10m', () => {
    const c = kongConf('docker/kong.conf');
    expect(c.plugins!.split(',')).toEqual(expect.arrayContaining(['bundled', 'lora-router', 'lora-poller']));
    expect(c.pluginserver_names!.split(',')).toHaveLength(1);
    expect(c.nginx_http_client_body_buffer_size).toBe('10m');
  });

  it('>= 3.9: one entry per plugin, one socket, one start command (one process serves both)', () => {
    const c = kongConf('docker/kong-3.9.conf');
    const entries = c.pluginserver_names!.split(',');
    expect(entries.map((e) => e.replace('_', '-')).sort()).toEqual(['lora-poller', 'lora-router']);
    expect(new Set(entries.map((e) => c[`pluginserver_${e}_socket`])).size).toBe(1);
    expect(entries.filter((e) => c[`pluginserver_${e}_start_cmd`] !== undefined)).toHaveLength(1);
  });
});

describe('docker/Dockerfile, replayed from its own lines (there is no Docker engine here)', () => {
  const replay = new DockerReplay(dockerfile, ROOT);
  afterAll(() => replay.close());
  const kongStage = replay.final;
  const built = [
    ...new Set(kongStage.steps.flatMap((s) => (s.kind === 'copy' && s.copy.from ? [s.copy.from] : []))),
  ];

  it('builds a Kong 3.x image whose runtime stage compiles on Node 24 from exactly the files it COPYs', () => {
    expect(dockerfile).toMatch(/ARG KONG_VERSION=3\.\d+/);
    expect(kongStage.base).toBe('kong:${KONG_VERSION}');
    expect(built).toEqual(['build']);
    expect(stageChain(replay.stages, 'build')[0]!.base).toMatch(/^node:24-/);
    const build = replay.stage('build');
    expect(build.ran.length).toBeGreaterThan(0);
  }, 240_000);

  it('holds the runtime only: package.json, the two plugin entry files, src, the plugin server, modules', () => {
    const image = replay.stage(kongStage.name).root;
    const pkg = join(image, PACKAGE_IN_IMAGE);
    expect(readdirSync(pkg).sort()).toEqual(['lib', 'node_modules', 'package.json']);
    expect(readdirSync(join(pkg, 'lib')).sort()).toEqual(['plugins', 'pluginserver', 'src']);
    expect(readdirSync(join(pkg, 'lib', 'plugins')).sort()).toEqual(['lora-poller.js', 'lora-router.js']);
    const files = (readdirSync(join(pkg, 'lib'), { recursive: true }) as string[]).filter((f) =>
      statSync(join(pkg, 'lib', f)).isFile(),
    );
    expect(files.filter((f) => !f.endsWith('.js'))).toEqual([]);
    expect(files.filter((f) => /^(sim|stack|bench|test)\//.test(f))).toEqual([]);
    // From the build context the Kong stage takes only the plugin-server command.
    const fromContext = kongStage.steps.flatMap((s) =>
      s.kind === 'copy' && !s.copy.from ? s.copy.sources : [],
    );
    expect(fromContext).toEqual(['docker/kong-lora-pluginserver']);
  }, 240_000);

  it.each(['docker/kong.conf', 'docker/kong-3.9.conf'])(
    '%s: every start_cmd and query_cmd runs in the image and finds the plugins Kong registers',
    (file) => {
      const image = replay.stage(kongStage.name).root;
      const c = kongConf(file);
      const entries = c.pluginserver_names!.split(',');
      const registered: string[] = [];
      for (const e of entries) {
        const query = c[`pluginserver_${e}_query_cmd`]!;
        expect(query).toMatch(/^\/usr\/local\/bin\/kong-lora-pluginserver .*--dump-all-plugins$/);
        const names = runInImage(image, query).map((i) => i.Name);
        // Kong >= 3.9 registers the first plugin a query_cmd prints; <= 3.8 all of them.
        registered.push(...(entries.length > 1 ? [names[0]!] : names));
        if (entries.length > 1) expect(names).toEqual([e.replace('_', '-')]);
        const start = c[`pluginserver_${e}_start_cmd`];
        if (start === undefined) continue;
        expect(start).toMatch(/^\/usr\/local\/bin\/kong-lora-pluginserver /);
        // The socket the server listens on (kong-pdk's default prefix) is the one Kong dials.
        expect(`/usr/local/kong/${start.match(/--sock-name (\S+)/)![1]}`).toBe(c[`pluginserver_${e}_socket`]);
        const dir = start.match(/-d (\S+)/)![1];
        expect(
          runInImage(image, `/usr/local/bin/kong-lora-pluginserver -d ${dir} --dump-all-plugins`)
            .map((i) => i.Name)
            .sort(),
        ).toEqual(['lora-poller', 'lora-router']);
      }
      expect(registered.sort()).toEqual(['lora-poller', 'lora-router']);
    },
    240_000,
  );
});

describe('the build context (.dockerignore; the replay above reads it too)', () => {
  const ignored = dockerIgnored(ROOT);

  it("leaves out the checkout's modules, builds, packed tarballs, sockets, test output and history", () => {
    const left = [
      '.git',
      'node_modules',
      'sim/node_modules/x/index.js',
      'dist/plugins/lora-router.js',
      'lib/pluginserver/main.js',
      'coverage',
      'test-output',
      'kong-lora-router-0.1.0.tgz',
      'docker/kong-lora-router-0.1.0.tgz',
      'lora.sock',
    ];
    expect(left.filter((p) => !ignored(p))).toEqual([]);
  });

  it('keeps every file the Dockerfile COPYs from it, and the sources it compiles', () => {
    const sources = parseDockerfile(dockerfile).flatMap((s) =>
      s.steps.flatMap((step) => (step.kind === 'copy' && !step.copy.from ? step.copy.sources : [])),
    );
    expect(sources.length).toBeGreaterThan(5);
    expect([...sources, 'src/runtime.ts', 'pluginserver/main.ts'].filter(ignored)).toEqual([]);
  });
});

describe('docker-compose.yml', () => {
  it('builds the simulated fleet from a stage of its own, which replays and runs the simulator', () => {
    const compose = parse(read('docker/docker-compose.yml'), { merge: true });
    const replay = new DockerReplay(dockerfile, ROOT);
    try {
      const target = compose.services.fleet.build.target as string;
      expect(target).not.toBe(replay.final.name);
      const fleet = replay.stage(target);
      const [node, script] = (compose.services.fleet.command as string).trim().split(/\s+/);
      expect(node).toBe('node');
      const help = execFileSync(process.execPath, [join(fleet.workdir, script!), '--help'], {
        timeout: 10_000,
      });
      expect(help.toString()).toContain('--vllm');
    } finally {
      replay.close();
    }
    for (const name of ['kong-1', 'kong-2']) expect(compose.services[name].build.target).toBeUndefined();
  }, 240_000);

  it('runs two Kong nodes on kong.yml and the 3.9 conf, the simulator on the ports kong.yml names, and Redis', () => {
    const compose = parse(read('docker/docker-compose.yml'), { merge: true }); // compose honours <<: merge keys
    const kongs = Object.entries(compose.services).filter(([n]) => n.startsWith('kong-'));
    expect(kongs).toHaveLength(2);
    for (const [, svc] of kongs as [string, any][]) {
      expect(svc.volumes).toEqual(
        expect.arrayContaining(['../kong.yml:/kong/kong.yml:ro', './kong-3.9.conf:/etc/kong/kong.conf:ro']),
      );
      expect(svc.environment.KONG_DECLARATIVE_CONFIG).toBe('/kong/kong.yml');
    }
    expect(compose.services.redis.image).toMatch(/^redis:/);
    // Both plugins on both nodes share that Redis (the same record, so the same runtime).
    const ours = parse(read('kong.yml')).services.flatMap((s: any) =>
      (s.plugins ?? []).filter((p: any) => p.name.startsWith('lora-')),
    );
    expect(ours.map((p: any) => p.config.redis)).toEqual([
      { host: 'redis', port: 6379, timeout: 200 },
      { host: 'redis', port: 6379, timeout: 200 },
    ]);
    const fleetCmd: string = compose.services.fleet.command;
    const first = Number(fleetCmd.match(/--port (\d+)/)![1]);
    const n = Number(fleetCmd.match(/--vllm (\d+)/)![1]) + Number(fleetCmd.match(/--llamacpp (\d+)/)![1]);
    const router = parse(read('kong.yml'))
      .services.flatMap((s: any) => s.plugins ?? [])
      .find((p: any) => p.name === 'lora-router').config;
    expect(router.replicas.map((r: any) => r.url)).toEqual(
      Array.from({ length: n }, (_, i) => `http://fleet:${first + i}`),
    );
    expect(compose.services.fleet.expose).toEqual(Array.from({ length: n }, (_, i) => String(first + i)));
  });
});
