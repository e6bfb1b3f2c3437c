/**
 * docker/'s Grafana dashboard queries only metrics the plugins export: the names are read from
 * lora-poller's `/lora/metrics` through the real plugin server, with fleet state in a real
 * redis-server (so the Redis gauge is there too), after real traffic to a simulated replica.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { LocalGateway } from '../../stack/gateway';
import { SimFleet } from '../../sim/fleet';
import { KongDriver, PluginServerProcess } from '../../harness/kong/driver';
import { BASE, PLUGINS_DIR, vllm } from '../kong/world';
import { RedisServer } from '../../harness/redis/server';

const ROOT = join(__dirname, '..', '..');
const dashboard = JSON.parse(
  readFileSync(join(ROOT, 'docker', 'grafana', 'dashboards', 'lora-router.json'), 'utf8'),
);

interface Panel {
  title: string;
  targets?: { expr: string }[];
  panels?: Panel[];
}
const panels = (ps: Panel[]): Panel[] => ps.flatMap((p) => [p, ...panels(p.panels ?? [])]);
const exprs: { panel: string; expr: string }[] = panels(dashboard.panels).flatMap((p) =>
  (p.targets ?? []).map((t) => ({ panel: p.title, expr: t.expr })),
);

const KEYWORDS = new Set([
  'by',
  'without',
  'on',
  'ignoring',
  'group_left',
  'group_right',
  'bool',
  'and',
  'or',
  'unless',
  'offset',
]);
/** The metric names a PromQL expression reads (not its functions, labels, strings or durations). */
export function metricNames(expr: string): string[] {
  const bare = expr
    .replace(/"(?:[^"\\]|\\.)*"/g, '')
    .replace(/\{[^}]*\}/g, '')
    .replace(/\[[^\]]*\]/g, '')
    .replace(/\b(?:by|without|on|ignoring)\s*\([^)]*\)/g, '');
  return [...bare.matchAll(/(?<![\w.])([a-zA-Z_:][\w:]*)(\s*\()?/g)]
    .filter((m) => !m[2] && !KEYWORDS.has(m[1]!))
    .map((m) => m[1]!);
}

let exported: Set<string>;
let redis: RedisServer;
let server: PluginServerProcess;
let driver: KongDriver;
let fleet: SimFleet;
const gateways: LocalGateway[] = [];

beforeAll(async () => {
  redis = await RedisServer.start();
  server = await PluginServerProcess.start({ pluginsDir: PLUGINS_DIR });
  driver = new KongDriver(server.socketPath);
  fleet = await SimFleet.start([vllm()]);
  const shared = redis.config('dash:');
  const router = await LocalGateway.create({
    driver,
    plugins: [
      {
        name: 'lora-router',
        config: {
          replicas: fleet.urls.map((url) => ({ url })),
          base_model: BASE,
          adapter_path_template: '/adapters/{name}',
          max_loaded_adapters: 1,
          queue_timeout_ms: 5000,
          redis: shared,
        },
      },
    ],
    serviceUrl: fleet.urls[0]!,
  });
  const status = await LocalGateway.create({
    driver,
    plugins: [{ name: 'lora-poller', config: { poll_interval_ms: 50, timeout_ms: 500, redis: shared } }],
    serviceUrl: 'http://127.0.0.1:9',
  });
  gateways.push(router, status);
  const chat = (model: string) =>
    router.handle({
      path: '/v1/chat/completions',
      headers: { 'content-type': 'application/json' },
      body: Buffer.from(
        JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 }),
      ),
    });
  // A load, then an unload to make room, and whatever errors come: labelled series appear.
  expect((await chat('a-lora')).status).toBe(200);
  expect((await chat('b-lora')).status).toBe(200);
  const text = (await status.handle({ method: 'GET', path: '/lora/metrics' })).body.toString();
  exported = new Set<string>();
  for (const [, name, type] of text.matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
    exported.add(name!);
    if (type === 'histogram') for (const s of ['_bucket', '_sum', '_count']) exported.add(name + s);
  }
}, 60_000);

afterAll(async () => {
  for (const g of gateways) await g.close();
  driver?.close();
  await server?.stop();
  await fleet?.stop();
  await redis?.close();
});

describe('docker/grafana/dashboards/lora-router.json', () => {
  it('reads metric names out of PromQL', () => {
    expect(
      metricNames(
        '1 - sum by (stage) (rate(a_total{result="ok"}[5m])) / clamp_min(sum(rate(b_total[5m])), 1e-9)',
      ),
    ).toEqual(['a_total', 'b_total']);
  });

  it('queries only metrics the plugins export', () => {
    expect(exported.size).toBeGreaterThan(5);
    const missing = exprs.flatMap(({ panel, expr }) =>
      metricNames(expr)
        .filter((m) => !exported.has(m))
        .map((m) => `${panel}: ${m}`),
    );
    expect(missing).toEqual([]);
  });

  it('shows decisions by stage, hit rate, loads/unloads and their duration, refusals, in-flight, saturation, snapshot age and Redis state', () => {
    const used = new Set(exprs.flatMap((e) => metricNames(e.expr)));
    for (const m of [
      'lora_router_decisions_total',
      'lora_router_adapter_loads_total',
      'lora_router_adapter_unloads_total',
      'lora_router_adapter_load_duration_seconds_bucket',
      'lora_router_refusals_total',
      'lora_router_in_flight',
      'lora_router_replica_saturation',
      'lora_router_snapshot_age_seconds',
      'lora_router_shared_state_up',
    ])
      expect([m, used.has(m)]).toEqual([m, true]);
  });

  it('is what docker-compose provisions, and Prometheus scrapes the route lora-poller answers', () => {
    const compose = parse(readFileSync(join(ROOT, 'docker', 'docker-compose.yml'), 'utf8'), { merge: true });
    const prom = parse(readFileSync(join(ROOT, 'docker', 'prometheus.yml'), 'utf8'));
    const deck = parse(readFileSync(join(ROOT, 'kong.yml'), 'utf8'));
    type Plugin = { name: string; config?: Record<string, unknown> };
    const service = deck.services.find((s: { plugins?: Plugin[] }) =>
      s.plugins?.some((p) => p.name === 'lora-poller'),
    );
    const poller = service.plugins.find((p: Plugin) => p.name === 'lora-poller');
    const basePath = (poller.config?.base_path as string | undefined) ?? '/lora';
    const job = prom.scrape_configs[0];
    expect(job.metrics_path).toBe(`${basePath}/metrics`);
    // The status paths sit behind the service's key-auth: Prometheus passes a consumer's key.
    if (service.plugins.some((p: Plugin) => p.name === 'key-auth')) {
      const keys = deck.consumers.flatMap((c: { keyauth_credentials?: { key: string }[] }) =>
        (c.keyauth_credentials ?? []).map((k) => k.key),
      );
      expect(keys).toContain(job.params.apikey[0]);
    }
    const kongs = Object.keys(compose.services).filter((n) => n.startsWith('kong-'));
    expect(job.static_configs[0].targets.sort()).toEqual(kongs.map((k) => `${k}:8000`).sort());
    expect(compose.services.prometheus.volumes).toContain(
      './prometheus.yml:/etc/prometheus/prometheus.yml:ro',
    );
    expect(compose.services.grafana.volumes).toEqual(
      expect.arrayContaining([
        './grafana/provisioning:/etc/grafana/provisioning:ro',
        './grafana/dashboards:/var/lib/grafana/dashboards:ro',
      ]),
    );
    const provider = parse(
      readFileSync(join(ROOT, 'docker', 'grafana', 'provisioning', 'dashboards', 'lora-router.yml'), 'utf8'),
    );
    expect(provider.providers[0].options.path).toBe('/var/lib/grafana/dashboards');
    const source = parse(
      readFileSync(join(ROOT, 'docker', 'grafana', 'provisioning', 'datasources', 'prometheus.yml'), 'utf8'),
    );
    const uids = new Set(
      exprs.length
        ? panels(dashboard.panels).map((p) => (p as { datasource?: { uid: string } }).datasource?.uid)
        : [],
    );
    expect([...uids]).toEqual([source.datasources[0].uid]);
  });
});
