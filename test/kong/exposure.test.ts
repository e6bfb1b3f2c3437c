/**
 * What the shipped deployment files expose, read as Kong and Docker would read them: the
 * status route (replica URLs, every tenant's adapter names) is for operators only, the Admin
 * API is not published on the host, and a routed request's proxy attempts are bounded.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { ROOT } from '../../harness/kong/process';

interface Plugin {
  name: string;
  config?: Record<string, unknown>;
}
interface Route {
  name?: string;
  paths?: string[];
  plugins?: Plugin[];
}
interface Service {
  name: string;
  retries?: number;
  connect_timeout?: number;
  routes?: Route[];
  plugins?: Plugin[];
}
interface Consumer {
  username: string;
  keyauth_credentials?: { key: string }[];
  acls?: { group: string }[];
}

const read = (p: string) => readFileSync(join(ROOT, p), 'utf8');
const deck = parse(read('kong.yml')) as { services: Service[]; consumers: Consumer[] };
const compose = parse(read('docker/docker-compose.yml')) as {
  services: Record<string, { ports?: (string | { target?: number })[] }>;
};
const prometheus = parse(read('docker/prometheus.yml')) as {
  scrape_configs: { params?: { apikey?: string[] } }[];
};

const pollerService = deck.services.find((s) => s.plugins?.some((p) => p.name === 'lora-poller'))!;
const routerService = deck.services.find((s) => s.plugins?.some((p) => p.name === 'lora-router'))!;
const basePath =
  (pollerService.plugins!.find((p) => p.name === 'lora-poller')!.config?.base_path as string) ?? '/lora';
const statusRoute = pollerService.routes!.find((r) => (r.paths ?? []).includes(basePath))!;
const pluginsOn = (r: Route) => [...(pollerService.plugins ?? []), ...(r.plugins ?? [])];

describe("kong.yml: lora-poller's route is for operators", () => {
  it('carries an acl allow-list or an ip-restriction on the route of base_path', () => {
    expect(statusRoute).toBeDefined();
    const guard = (statusRoute.plugins ?? []).find((p) => p.name === 'acl' || p.name === 'ip-restriction');
    expect(guard).toBeDefined();
    expect((guard!.config?.allow as string[] | undefined)?.length).toBeGreaterThan(0);
  });

  it('with acl: an authentication plugin names the consumer, and the LLM routes do not carry the guard', () => {
    const acl = (statusRoute.plugins ?? []).find((p) => p.name === 'acl');
    if (!acl) return;
    // acl (priority 950) needs a consumer: key-auth (1250) runs before it.
    expect(pluginsOn(statusRoute).some((p) => p.name === 'key-auth')).toBe(true);
    const groups = acl.config!.allow as string[];
    const operators = deck.consumers.filter((c) => (c.acls ?? []).some((a) => groups.includes(a.group)));
    expect(operators.length).toBeGreaterThan(0);
    // The API consumer is not an operator: its key does not open the status route.
    const demo = deck.consumers.find((c) => c.username === 'demo')!;
    expect((demo.acls ?? []).some((a) => groups.includes(a.group))).toBe(false);
    // Prometheus scrapes /metrics on that route: with an operator's key.
    const key = prometheus.scrape_configs[0]!.params?.apikey?.[0];
    const keysOf = (c: Consumer) => (c.keyauth_credentials ?? []).map((k) => k.key);
    expect(operators.flatMap(keysOf)).toContain(key);
  });
});

describe('docker-compose.yml', () => {
  it("publishes no Kong node's Admin API (8001, 8444) on the host", () => {
    const published = Object.entries(compose.services).flatMap(([name, s]) =>
      (s.ports ?? []).map((p) => ({
        name,
        container: typeof p === 'string' ? Number(p.split(':').at(-1)!.split('/')[0]) : p.target,
      })),
    );
    expect(published.filter((p) => p.container === 8001 || p.container === 8444)).toEqual([]);
    // The proxy stays published.
    expect(published.some((p) => p.container === 8000)).toBe(true);
  });
});

describe("kong.yml: a routed request's proxy attempts are bounded", () => {
  // Kong/kong 3.9.3 kong/db/schema/entities/services.lua: `retries` default 5, `connect_timeout`
  // default 60000 ms; kong/pdk/service.lua `set_target` keeps the service's values.
  it('sets retries <= 1 and a connect_timeout of a few seconds on the lora-router service', () => {
    expect(routerService.retries).toBeDefined();
    expect(routerService.retries!).toBeLessThanOrEqual(1);
    expect(routerService.connect_timeout).toBeDefined();
    expect(routerService.connect_timeout!).toBeLessThanOrEqual(5000);
  });
});
