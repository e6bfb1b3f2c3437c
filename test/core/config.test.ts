import { ConfigError, exportSchema, luaPattern, validateRecord } from '../../src/config/kong-schema';
import { parsePollerConfig, parseRouterConfig } from '../../src/config/parse';
import { routerSchema } from '../../src/config/router-schema';
import { routerConfigWarnings } from '../../src/config/warnings';
import { redisOptions } from '../../src/fleet/redis/connection';

function fieldErrors(fn: () => unknown): Record<string, string> {
  try {
    fn();
  } catch (e) {
    if (e instanceof ConfigError) return Object.fromEntries(e.fieldErrors.map((f) => [f.field, f.message]));
    throw e;
  }
  throw new Error('config was accepted');
}

describe('lora-router config', () => {
  it('fills every default, including nested records', () => {
    const c = parseRouterConfig({ replicas: [{ url: 'http://10.0.0.1:8000/' }] });
    expect(c).toMatchObject({
      replicas: [{ url: 'http://10.0.0.1:8000', backend: 'vllm', priority: 0 }],
      adapters: [],
      max_loaded_adapters: 0,
      // 2, not 4: a holder with 2 waiting spreads its adapter, which halves p99 TTFT at cheap loads (issue 15).
      target_waiting_per_replica: 2,
      kv_ceiling: 0.8,
      picker: 'p2c',
      scorer_weights: { queue: 2, kv_cache: 2, in_flight: 2, prefix: 1 },
    });
    expect(c.base_model).toBeUndefined();
  });

  it("accepts Kong's extra keys, null for unset fields, and {} for an empty array (as Lua sends them)", () => {
    const c = parseRouterConfig({
      replicas: [{ url: 'http://a:1', backend: 'llamacpp', priority: 2 }],
      adapters: {},
      base_model: null,
      adapter_path_template: null,
      route_id: 'r',
      service_id: null,
      consumer_id: null,
      __plugin_id: 'p',
      __seq__: 3,
      __key__: 'k',
      __ws_id: 'w',
    });
    expect(c.adapters).toEqual([]);
    expect(c.replicas[0]).toEqual({ url: 'http://a:1', backend: 'llamacpp', priority: 2 });
  });

  it('refuses bad configs with messages naming the field', () => {
    expect(fieldErrors(() => parseRouterConfig({}))).toEqual({ 'config.replicas': 'required field missing' });
    expect(
      fieldErrors(() =>
        parseRouterConfig({
          replicas: [{ backend: 'tgi' }, { url: 'ftp://x:1' }, { url: 'http://noport' }],
          max_loaded_adapters: -1,
          kv_ceiling: 2,
          picker: 'random',
          adapters: [{ path: '/a' }],
          bogus: 1,
        }),
      ),
    ).toEqual({
      'config.replicas[1].url': 'required field missing',
      'config.replicas[1].backend': 'expected one of: vllm, llamacpp',
      'config.replicas[2].url': 'invalid value: ftp://x:1',
      'config.replicas[3].url': 'invalid value: http://noport',
      'config.adapters[1].name': 'required field missing',
      'config.max_loaded_adapters': 'value should be between 0 and 4096',
      'config.kv_ceiling': 'value should be between 0.05 and 1',
      'config.picker': 'expected one of: p2c, max-score',
      'config.bogus': 'unknown field',
    });
    expect(fieldErrors(() => parseRouterConfig({ replicas: [] }))).toEqual({
      'config.replicas': 'length must be at least 1',
    });
    expect(
      fieldErrors(() => parseRouterConfig({ replicas: [{ url: 'http://a:1' }], max_loaded_adapters: 1.5 })),
    ).toEqual({
      'config.max_loaded_adapters': 'expected an integer',
    });
  });

  it('refuses what the schema language cannot express: bad regex, template without {name}, duplicates', () => {
    expect(
      fieldErrors(() =>
        parseRouterConfig({
          replicas: [{ url: 'http://a:1' }, { url: 'http://a:1/' }],
          adapter_name_pattern: '([',
          adapter_path_template: '/adapters/',
          adapters: [{ name: 'x' }, { name: 'x' }],
          backoff_base_ms: 10,
          backoff_max_ms: 5,
        }),
      ),
    ).toMatchObject({
      'config.adapter_name_pattern': expect.stringMatching(/not a valid regular expression/),
      'config.adapter_path_template': 'must contain {name}',
      'config.replicas[2].url': 'the same replica as config.replicas[1]',
      'config.adapters[2].name': 'duplicate adapter x',
      'config.backoff_max_ms': 'must be >= backoff_base_ms',
    });
  });

  it('refuses a loaded adapter named with a comma, which vLLM cannot report running unambiguously', () => {
    expect(
      fieldErrors(() =>
        parseRouterConfig({
          replicas: [{ url: 'http://a:1' }],
          adapters: [
            { name: 'ok' },
            { name: 'team,a', path: '/adapters/team-a' },
            { name: 's,t', static: true },
          ],
        }),
      ),
    ).toEqual({
      'config.adapters[2].name': expect.stringMatching(/may not contain ','.*joined with ','/),
    });
  });

  it('compares replica URLs normalised (trailing slash, scheme and host case) and names no address in the error', () => {
    const errs = fieldErrors(() =>
      parseRouterConfig({
        replicas: [
          { url: 'http://10.0.0.7:8000' },
          { url: 'http://10.0.0.7:8000/' },
          { url: 'http://GPU-1:8000' },
        ],
      }),
    );
    expect(errs).toEqual({ 'config.replicas[2].url': 'the same replica as config.replicas[1]' });
    expect(JSON.stringify(errs)).not.toContain('10.0.0.7');
    expect(
      fieldErrors(() =>
        parseRouterConfig({ replicas: [{ url: 'http://gpu-1:8000/' }, { url: 'http://GPU-1:8000' }] }),
      ),
    ).toEqual({ 'config.replicas[2].url': 'the same replica as config.replicas[1]' });
    // The normalised form is what the router keys replicas by.
    expect(parseRouterConfig({ replicas: [{ url: 'https://GPU-1:8443/' }] }).replicas[0]!.url).toBe(
      'https://gpu-1:8443',
    );
  });

  it('exports the schema without descriptions, otherwise unchanged', () => {
    const exported = JSON.stringify(exportSchema(routerSchema));
    expect(exported).not.toMatch(/description/);
    expect(validateRecord(exportSchema(routerSchema), { replicas: [{ url: 'http://a:1' }] })).toEqual(
      validateRecord(routerSchema, { replicas: [{ url: 'http://a:1' }] }),
    );
  });
});

describe('lora-poller config', () => {
  it('has defaults and bounds', () => {
    expect(parsePollerConfig({ __plugin_id: 'x', route_id: 'r', plugin_instance_name: 'n' })).toEqual({
      poll_interval_ms: 500,
      timeout_ms: 1000,
      unhealthy_timeouts: 2,
      jitter: 0.1,
      base_path: '/lora',
      endpoints: ['status', 'metrics', 'page'],
      // No host: state stays in the process.
      redis: {
        port: 6379,
        database: 0,
        ssl: false,
        ssl_verify: false,
        prefix: 'kong_lora_router:',
        timeout: 200,
        node_ttl_ms: 10000,
      },
    });
    expect(fieldErrors(() => parsePollerConfig({ poll_interval_ms: 0, endpoints: ['nope'] }))).toEqual({
      'config.poll_interval_ms': 'value should be between 50 and 600000',
      'config.endpoints[1]': 'expected one of: status, metrics, page',
    });
  });

  it("takes a shared Redis under the names of Kong's own Redis record (kong/tools/redis/schema.lua), refusing bad bounds", () => {
    const c = parsePollerConfig({
      redis: {
        host: 'redis',
        port: 6380,
        password: 's',
        ssl: true,
        ssl_verify: true,
        server_name: 'r.example',
        timeout: 150,
      },
    });
    expect(c.redis).toMatchObject({
      host: 'redis',
      port: 6380,
      password: 's',
      ssl: true,
      ssl_verify: true,
      server_name: 'r.example',
      timeout: 150,
    });
    // Kong's Redis password has len_min = 0: "" means no AUTH.
    expect(parsePollerConfig({ redis: { host: 'r', password: '' } }).redis.password).toBe('');
    expect(
      fieldErrors(() => parsePollerConfig({ redis: { host: 'r', port: 0, timeout: 1, nope: 1 } })),
    ).toEqual({
      'config.redis.port': 'value should be between 1 and 65535',
      'config.redis.timeout': 'value should be between 10 and 60000',
      'config.redis.nope': 'unknown field',
    });
  });

  it('maps the deprecated tls and timeout_ms onto ssl (+ ssl_verify) and timeout, saying so, and refuses both names set apart', () => {
    const said: string[] = [];
    const c = parsePollerConfig({ redis: { host: 'r', tls: true, timeout_ms: 300 } }, (m) => said.push(m));
    // tls always verified the certificate: it keeps doing so.
    expect(c.redis).toMatchObject({ ssl: true, ssl_verify: true, timeout: 300 });
    expect(c.redis).not.toHaveProperty('tls');
    expect(c.redis).not.toHaveProperty('timeout_ms');
    expect(said).toEqual([
      expect.stringMatching(/config\.redis\.tls is deprecated, use config\.redis\.ssl/),
      expect.stringMatching(/config\.redis\.timeout_ms is deprecated, use config\.redis\.timeout/),
    ]);
    // The same value under both names is fine.
    expect(
      parseRouterConfig({
        replicas: [{ url: 'http://a:1' }],
        redis: { host: 'r', timeout: 500, timeout_ms: 500 },
      }).redis.timeout,
    ).toBe(500);
    expect(
      fieldErrors(() =>
        parseRouterConfig({
          replicas: [{ url: 'http://a:1' }],
          redis: { host: 'r', ssl: true, tls: false, timeout: 500, timeout_ms: 300 },
        }),
      ),
    ).toEqual({
      'config.redis.tls':
        'deprecated alias of ssl, set to a different value (tls: false, ssl: true): keep only ssl',
      'config.redis.timeout_ms':
        'deprecated alias of timeout, set to a different value (timeout_ms: 300, timeout: 500): keep only timeout',
    });
    // Kong itself warns too: the old names carry Kong's `deprecation` attribute in the exported schema.
    const exported = JSON.stringify(exportSchema(routerSchema));
    expect(exported).toMatch(
      /"tls":\{"type":"boolean","deprecation":\{"message":"[^"]+","removal_in_version":"2\.0\.0"\}\}/,
    );
  });

  it("takes Sentinel under Kong Enterprise's names, refusing a half-set or read-only one", () => {
    const c = parsePollerConfig({
      redis: { sentinel_master: 'mymaster', sentinel_nodes: [{ host: 's1' }, { host: 's2', port: 26380 }] },
    });
    expect(c.redis).toMatchObject({
      sentinel_master: 'mymaster',
      sentinel_nodes: [
        { host: 's1', port: 26379 },
        { host: 's2', port: 26380 },
      ],
    });
    expect(fieldErrors(() => parsePollerConfig({ redis: { sentinel_master: 'm' } }))).toEqual({
      'config.redis.sentinel_nodes': 'required with sentinel_master or sentinel_role',
    });
    expect(
      fieldErrors(() =>
        parsePollerConfig({
          redis: { host: 'r', sentinel_nodes: [{ host: 's' }], sentinel_role: 'any' },
        }),
      ),
    ).toEqual({
      'config.redis.sentinel_master': 'required with sentinel_nodes or sentinel_role',
      'config.redis.host':
        'set host (a standalone Redis) or sentinel_master with sentinel_nodes (Sentinel), not both',
      'config.redis.sentinel_role':
        'only master is supported: the plugins write their fleet state, which a replica (any) refuses',
    });
    expect(
      fieldErrors(() => parsePollerConfig({ redis: { sentinel_master: 'm', sentinel_nodes: [] } })),
    ).toEqual({
      'config.redis.sentinel_nodes': 'length must be at least 1',
    });
  });
});

describe("Kong Enterprise's Redis fields", () => {
  // Kong Enterprise's Redis record (rate-limiting-advanced and its partials): connect_timeout,
  // send_timeout and read_timeout (ms, default 2000 each), keepalive_pool_size (256) and
  // keepalive_backlog, cluster_nodes with cluster_max_redirections (5), connection_is_proxied
  // (false); sentinel_nodes default to host 127.0.0.1, port 6379 (Kong/sdk-konnect-go,
  // konnect Terraform provider 3.4.3 `gateway_partial` redis-ee).
  const ee = {
    host: 'r',
    connect_timeout: 300,
    send_timeout: 150,
    read_timeout: 400,
    keepalive_pool_size: 256,
    keepalive_backlog: 10,
    cluster_max_redirections: 5,
    connection_is_proxied: true,
  };

  it('takes the timeouts into the ioredis bounds and accepts the pool fields', () => {
    const c = parsePollerConfig({ redis: ee });
    const o = redisOptions(c.redis);
    expect(o.connectTimeout).toBe(300);
    // ioredis bounds a whole call (sent, then answered) with one timer: the larger of the two.
    expect(o.commandTimeout).toBe(400);
    // Unset, `timeout` bounds both.
    const plain = redisOptions(parsePollerConfig({ redis: { host: 'r', timeout: 250 } }).redis);
    expect([plain.connectTimeout, plain.commandTimeout]).toEqual([250, 250]);
  });

  it('refuses a Redis Cluster and a proxied Sentinel, saying what to write instead', () => {
    expect(
      fieldErrors(() => parsePollerConfig({ redis: { cluster_nodes: [{ ip: '10.0.0.1', port: 6379 }] } })),
    ).toEqual({
      'config.redis.cluster_nodes':
        "Redis Cluster is not supported (the plugins' scripts touch keys in many hash slots): set host and port of a standalone Redis, or sentinel_master with sentinel_nodes",
    });
    expect(
      fieldErrors(() =>
        parsePollerConfig({
          redis: { sentinel_master: 'm', sentinel_nodes: [{ host: 's' }], connection_is_proxied: true },
        }),
      ),
    ).toEqual({
      'config.redis.connection_is_proxied':
        'a proxied connection goes to host and port (the proxy), not through Sentinel: set host and port, or leave connection_is_proxied false',
    });
  });
});

describe('Lua patterns (Kong `match`)', () => {
  it.each([
    ['^https?://[^/%s]+:%d+/?$', 'http://10.0.0.1:8000', true],
    ['^https?://[^/%s]+:%d+/?$', 'https://vllm-0.svc:443/', true],
    ['^https?://[^/%s]+:%d+/?$', 'http://a b:1', false],
    ['^https?://[^/%s]+:%d+/?$', 'http://a:1/v1', false],
    ['^%a%w*$', 'abc1', true],
    ['^%a%w*$', '1abc', false],
    ['a.-b', 'axxbyyb', true],
    ['^%d+%.%d+$', '1.5', true],
    ['^%d+%.%d+$', '1x5', false],
  ])('%s against %s is %s', (pattern, value, expected) => {
    expect(luaPattern(pattern).test(value)).toBe(expected);
  });
});

describe('lease_max_age_ms against the access phase', () => {
  it('is not warned about below the longest access phase: an admission that waited takes a fresh lease', () => {
    const c = parseRouterConfig({
      replicas: [{ url: 'http://10.0.0.1:8000' }],
      base_model: 'm',
      adapter_path_template: '/adapters/{name}',
      max_loaded_adapters: 4,
      lease_max_age_ms: 3000,
    });
    // test/core/lease-through-load.test.ts: the lease a request is proxied on is open in the store.
    expect(routerConfigWarnings(c)).toEqual([]);
  });
});
