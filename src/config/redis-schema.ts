import type { FieldDef } from './kong-schema';

/**
 * The `redis` record both plugins take: set `host` to share fleet state between Kong nodes (and
 * plugin-server processes); unset, each process keeps its own state in memory. Its own fields,
 * not Kong's shared Redis schema (Kong/kong kong/tools/redis/schema.lua at 1ac8c2f: `ssl`, `ssl_verify`,
 * `server_name`, `timeout` default 2000): `host`, `port`, `username`, `password` and `database`
 * mean the same there; `tls` always verifies the certificate (Node's default), and `timeout_ms` is far shorter
 * because a slow Redis must not stall routing (the node decides alone past it).
 */
export const redisField: FieldDef = {
  type: 'record',
  description:
    'Shared fleet state for several Kong nodes: `{host, port, username, password, database, tls, prefix, timeout_ms, node_ttl_ms}`. Without `host`, state stays in this process. Configure both plugins alike.',
  fields: [
    { host: { type: 'string', description: 'Redis host; unset keeps state in process.' } },
    { port: { type: 'integer', default: 6379, between: [1, 65535], description: 'Redis port.' } },
    { username: { type: 'string', referenceable: true, description: 'ACL user (Redis 6+).' } },
    {
      password: {
        type: 'string',
        referenceable: true,
        encrypted: true,
        description: 'A `{vault://...}` reference keeps it out of the declarative config.',
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
    {
      tls: {
        type: 'boolean',
        default: false,
        description: 'Connect over TLS (the server certificate is verified).',
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
      timeout_ms: {
        type: 'integer',
        default: 200,
        between: [10, 60000],
        description: 'Bound on one Redis call; past it the node decides from its own state.',
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
  ],
};

export interface RedisConfig {
  host?: string;
  port: number;
  username?: string;
  password?: string;
  database: number;
  tls: boolean;
  prefix: string;
  timeout_ms: number;
  node_ttl_ms: number;
}
