import type { FieldDef, FieldError } from './kong-schema';
import { checkEnterpriseRedis, enterpriseRedisFields, type EnterpriseRedis } from './redis-enterprise';

/**
 * The `redis` record both plugins take, under the names Kong's own plugins use, so that what an
 * operator writes for rate-limiting works here. Kong/kong 3.9.3 kong/tools/redis/schema.lua:
 * `host`, `port`, `timeout`, `username`, `password` (`len_min = 0`), `database`, `ssl`,
 * `ssl_verify`, `server_name`. Sentinel under Kong Enterprise's names, as its Redis record
 * exposes them (Kong/sdk-konnect-go docs/models/components/sentinelrole.md and
 * sentinelnodes.md at 01ea966; docs.konghq.com rate-limiting-advanced configuration):
 * `sentinel_master`, `sentinel_role` (master, slave, any), `sentinel_nodes` (`{host, port}`
 * records), `sentinel_username`, `sentinel_password`; its other fields in redis-enterprise.ts.
 * Ours besides: `prefix`, `node_ttl_ms`.
 * Where ours differ from Kong's: `timeout` defaults to 200 ms, not 2000 (a slow Redis must
 * not stall routing: past it the node decides alone), `port` and `database` are bounded.
 * Redis Cluster is refused (fleet/redis/connection.ts): the scripts touch keys in many slots.
 */

/** Names the record took before Kong's, kept as aliases until `removal_in_version`. */
const DEPRECATED = {
  tls: {
    replacedBy: 'ssl',
    message: 'lora plugins: config.redis.tls is deprecated, use config.redis.ssl (with ssl_verify) instead',
  },
  timeout_ms: {
    replacedBy: 'timeout',
    message: 'lora plugins: config.redis.timeout_ms is deprecated, use config.redis.timeout instead',
  },
} as const;
const REMOVAL = '2.0.0';

const TIMEOUT_DEFAULT = 200;

export const redisField: FieldDef = {
  type: 'record',
  description:
    "Shared fleet state for several Kong nodes, named as Kong's own plugins name it: `{host, port, username, password, database, ssl, ssl_verify, server_name, timeout}`, or Sentinel with `{sentinel_master, sentinel_role, sentinel_nodes, sentinel_username, sentinel_password}`; plus `prefix` and `node_ttl_ms`. Kong Enterprise's `connect_timeout`, `send_timeout`, `read_timeout` are taken, its `keepalive_*` and `cluster_max_redirections` accepted without effect, `cluster_nodes` refused. Without `host` or `sentinel_master`, state stays in this process. Configure both plugins alike.",
  fields: [
    {
      host: {
        type: 'string',
        description: 'Redis host (standalone); unset (and no Sentinel) keeps state in process.',
      },
    },
    { port: { type: 'integer', default: 6379, between: [1, 65535], description: 'Redis port.' } },
    {
      timeout: {
        type: 'integer',
        default: TIMEOUT_DEFAULT,
        between: [10, 60000],
        description:
          "Bound on connecting and on one Redis call, in ms; past it the node decides from its own state. Kong's plugins default to 2000; routing waits on it, hence 200.",
      },
    },
    { username: { type: 'string', referenceable: true, description: 'ACL user (Redis 6+).' } },
    {
      password: {
        type: 'string',
        referenceable: true,
        encrypted: true,
        len_min: 0,
        description:
          'A `{vault://...}` reference keeps it out of the declarative config. Empty or unset: no AUTH.',
      },
    },
    {
      database: {
        type: 'integer',
        default: 0,
        between: [0, 15],
        description: 'Redis logical database (`SELECT`).',
      },
    },
    { ssl: { type: 'boolean', default: false, description: 'Connect over TLS.' } },
    {
      ssl_verify: {
        type: 'boolean',
        default: false,
        description:
          "With `ssl`: verify the server certificate against Node's CA store (add a CA with `NODE_EXTRA_CA_CERTS` in the plugin server's environment). Off by default, as in Kong.",
      },
    },
    {
      server_name: {
        type: 'string',
        description:
          'With `ssl`: the SNI sent, and the name the certificate is checked against (default: the host).',
      },
    },
    {
      sentinel_master: {
        type: 'string',
        description:
          'Sentinel: the name of the monitored primary (`sentinel monitor <name> ...`). Set with `sentinel_nodes`, instead of `host`.',
      },
    },
    {
      sentinel_role: {
        type: 'string',
        one_of: ['master', 'slave', 'any'],
        description:
          "Sentinel: the role to connect to. Only `master` (the default) is accepted: the plugins write their state. Kong Enterprise's values are kept so its records validate.",
      },
    },
    {
      sentinel_nodes: {
        type: 'array',
        len_min: 1,
        description: 'Sentinel: the sentinels to ask for the primary, `{host, port}` each.',
        elements: {
          type: 'record',
          fields: [
            { host: { type: 'string', required: true, description: 'Sentinel host.' } },
            {
              port: {
                type: 'integer',
                default: 26379,
                between: [1, 65535],
                description:
                  "Sentinel port. Kong Enterprise's default is 6379 (the Redis port); 26379 here, the port a sentinel listens on unless told otherwise: write it for each sentinel if yours differ.",
              },
            },
          ],
        },
      },
    },
    {
      sentinel_username: {
        type: 'string',
        referenceable: true,
        description: 'Sentinel: ACL user for the sentinels themselves.',
      },
    },
    {
      sentinel_password: {
        type: 'string',
        referenceable: true,
        encrypted: true,
        len_min: 0,
        description: 'Sentinel: password for the sentinels themselves (`requirepass` in sentinel.conf).',
      },
    },
    {
      prefix: {
        type: 'string',
        default: 'kong_lora_router:',
        len_min: 1,
        description: 'Key prefix: fleets with different prefixes share nothing.',
      },
    },
    {
      node_ttl_ms: {
        type: 'integer',
        default: 10000,
        between: [500, 600000],
        description:
          'A node silent this long is gone: its load and unload locks end. Its in-flight leases stay until not renewed for `lease_max_age_ms` (it may be cut off from Redis with requests running).',
      },
    },
    ...enterpriseRedisFields,
    {
      tls: {
        type: 'boolean',
        deprecation: { message: DEPRECATED.tls.message, removal_in_version: REMOVAL },
        description:
          'Deprecated: `ssl` with `ssl_verify`. `tls: true` means both (it always verified the certificate).',
      },
    },
    {
      timeout_ms: {
        type: 'integer',
        between: [10, 60000],
        deprecation: { message: DEPRECATED.timeout_ms.message, removal_in_version: REMOVAL },
        description: 'Deprecated: `timeout`.',
      },
    },
  ],
};

export interface SentinelNode {
  host: string;
  port: number;
}

/** The record after `normalizeRedis`: Kong's names only. */
export interface RedisConfig extends EnterpriseRedis {
  host?: string;
  port: number;
  timeout: number;
  username?: string;
  password?: string;
  database: number;
  ssl: boolean;
  ssl_verify: boolean;
  server_name?: string;
  sentinel_master?: string;
  sentinel_role?: 'master' | 'slave' | 'any';
  sentinel_nodes?: SentinelNode[];
  sentinel_username?: string;
  sentinel_password?: string;
  prefix: string;
  node_ttl_ms: number;
}

/** The record as validated: Kong's names and the deprecated ones. */
type RawRedis = RedisConfig & { tls?: boolean; timeout_ms?: number };

/** Whether the record points at a Redis (standalone or Sentinel): else state stays in process. */
export function sharesState(c: RedisConfig | undefined): c is RedisConfig {
  return c !== undefined && (c.host !== undefined || c.sentinel_master !== undefined);
}

/** What a `redis` record addresses: records that differ only in timeouts share one state. */
export function stateKeyOf(redis?: RedisConfig): string {
  if (!sharesState(redis)) return '';
  const where =
    redis.sentinel_master !== undefined
      ? [redis.sentinel_master, (redis.sentinel_nodes ?? []).map((n) => `${n.host}:${n.port}`).sort()]
      : [redis.host, redis.port];
  return JSON.stringify([...where, redis.database, redis.prefix, redis.username ?? '']);
}

/**
 * Maps the deprecated names onto Kong's and checks what the schema language cannot say.
 * Kong fills defaults before the plugin sees the record, so a new field holding its default
 * may not have been written: the old name then wins; one holding another value was written,
 * and a different old value beside it is an error.
 */
export function normalizeRedis(
  raw: RedisConfig,
  path: string,
): { config: RedisConfig; errors: FieldError[]; deprecations: string[] } {
  const { tls, timeout_ms, ...c } = raw as RawRedis;
  const config: RedisConfig = { ...c };
  const errors: FieldError[] = [];
  const deprecations: string[] = [];
  if (tls !== undefined) {
    deprecations.push(DEPRECATED.tls.message);
    if (c.ssl !== false && c.ssl !== tls)
      errors.push({
        field: `${path}.tls`,
        message: `deprecated alias of ssl, set to a different value (tls: ${tls}, ssl: ${c.ssl}): keep only ssl`,
      });
    else if (tls) {
      config.ssl = true;
      config.ssl_verify = true;
    }
  }
  if (timeout_ms !== undefined) {
    deprecations.push(DEPRECATED.timeout_ms.message);
    if (c.timeout !== TIMEOUT_DEFAULT && c.timeout !== timeout_ms)
      errors.push({
        field: `${path}.timeout_ms`,
        message: `deprecated alias of timeout, set to a different value (timeout_ms: ${timeout_ms}, timeout: ${c.timeout}): keep only timeout`,
      });
    else config.timeout = timeout_ms;
  }
  const sentinel =
    c.sentinel_master !== undefined || c.sentinel_nodes !== undefined || c.sentinel_role !== undefined;
  if (sentinel) {
    if (c.sentinel_master === undefined)
      errors.push({
        field: `${path}.sentinel_master`,
        message: 'required with sentinel_nodes or sentinel_role',
      });
    if (c.sentinel_nodes === undefined)
      errors.push({
        field: `${path}.sentinel_nodes`,
        message: 'required with sentinel_master or sentinel_role',
      });
    if (c.host !== undefined)
      errors.push({
        field: `${path}.host`,
        message: 'set host (a standalone Redis) or sentinel_master with sentinel_nodes (Sentinel), not both',
      });
    if (c.sentinel_role !== undefined && c.sentinel_role !== 'master')
      errors.push({
        field: `${path}.sentinel_role`,
        message: `only master is supported: the plugins write their fleet state, which a ${c.sentinel_role === 'slave' ? 'replica' : 'replica (any)'} refuses`,
      });
  }
  errors.push(...checkEnterpriseRedis(c, path));
  return { config, errors, deprecations };
}
