/**
 * Docker cannot run here: these tests read kong.yml and docker/ and check that they agree
 * with the built plugins (names, schema, socket names, paths), the way Kong would read them.
 */
import { mkdtempSync, readFileSync, rmSync, symlinkSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'yaml';
import { validateRecord } from '../../src/config/kong-schema';
import { ROOT } from './process';
import { dumpPlugins, PLUGINS_DIR } from './world';

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
const PLUGIN_DIR_IN_IMAGE = '/usr/local/kong/js-plugins';

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
  const startCmdDir = (cmd: string) => cmd.match(/-d (\S+)/)![1];

  it('<= 3.8: one entry whose socket, start and query commands agree and load both plugins', () => {
    const c = kongConf('docker/kong.conf');
    expect(c.plugins!.split(',')).toEqual(expect.arrayContaining(['bundled', 'lora-router', 'lora-poller']));
    const [entry] = c.pluginserver_names!.split(',');
    const sock = c[`pluginserver_${entry}_socket`]!;
    expect(c[`pluginserver_${entry}_start_cmd`]).toContain(`--sock-name ${sock.split('/').pop()}`);
    expect(startCmdDir(c[`pluginserver_${entry}_start_cmd`]!)).toBe(PLUGIN_DIR_IN_IMAGE);
    expect(c[`pluginserver_${entry}_query_cmd`]).toMatch(/--dump-all-plugins$/);
    expect(c.nginx_http_client_body_buffer_size).toBe('10m');
  });

  it('>= 3.9: one entry per plugin, one socket, one start command, each query printing only its plugin', () => {
    const c = kongConf('docker/kong-3.9.conf');
    const entries = c.pluginserver_names!.split(',');
    expect(entries.map((e) => e.replace('_', '-')).sort()).toEqual(['lora-poller', 'lora-router']);
    const sockets = new Set(entries.map((e) => c[`pluginserver_${e}_socket`]));
    expect(sockets.size).toBe(1);
    expect(entries.filter((e) => c[`pluginserver_${e}_start_cmd`] !== undefined)).toHaveLength(1);
    const start = entries.map((e) => c[`pluginserver_${e}_start_cmd`]).find(Boolean)!;
    expect(start).toContain(`--sock-name ${[...sockets][0]!.split('/').pop()}`);
    expect(startCmdDir(start)).toBe(PLUGIN_DIR_IN_IMAGE);
    // Rebuild the image's per-plugin query directories here (symlinks, as the Dockerfile makes
    // them) and run each query_cmd's equivalent: the first plugin printed must be its own.
    const tmp = mkdtempSync(join(tmpdir(), 'js-query-'));
    try {
      for (const e of entries) {
        const plugin = e.replace('_', '-');
        const dir = startCmdDir(c[`pluginserver_${e}_query_cmd`]!);
        expect(dir).toBe(`/usr/local/kong/js-query/${plugin}`);
        expect(dockerfile).toContain('/usr/local/kong/js-query/$p/$p.js');
        const local = join(tmp, plugin);
        mkdirSync(local);
        symlinkSync(join(PLUGINS_DIR, `${plugin}.js`), join(local, `${plugin}.js`));
        expect(dumpPlugins(local).map((i) => i.Name)).toEqual([plugin]);
      }
    } finally {
      rmSync(tmp, { recursive: true, force: true });
    }
  });
});

describe('docker/Dockerfile and docker-compose.yml', () => {
  it('builds on Kong 3.x with Node 20 and links exactly the two entry files into the plugin directory', () => {
    expect(dockerfile).toMatch(/ARG KONG_VERSION=3\.\d+/);
    expect(dockerfile).toMatch(/FROM node:20/);
    expect(dockerfile).toContain(
      `ln -s /usr/local/kong/lora-router/dist/plugins/$p.js ${PLUGIN_DIR_IN_IMAGE}/$p.js`,
    );
    expect(dockerfile).toMatch(/for p in lora-router lora-poller/);
    // The project's plugin-server entry (kong-pdk's server wrapped), for start and query commands.
    expect(dockerfile).toContain('/usr/local/kong/lora-router/dist/pluginserver/main.js');
    for (const f of ['docker/kong.conf', 'docker/kong-3.9.conf']) {
      const cmds = Object.entries(kongConf(f)).filter(([k]) => /_(start|query)_cmd$/.test(k));
      expect(cmds.length).toBeGreaterThan(0);
      for (const [, cmd] of cmds) expect(cmd).toMatch(/^\/usr\/local\/bin\/kong-lora-pluginserver /);
    }
  });

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
      { host: 'redis', port: 6379, timeout_ms: 200 },
      { host: 'redis', port: 6379, timeout_ms: 200 },
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
