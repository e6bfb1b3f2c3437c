import type { FieldDef } from './kong-schema';

/**
 * The `redis` record both plugins take, shaped like Kong's rate-limiting `redis` policy: set
 * `host` to share fleet state between Kong nodes (and plugin-server processes); unset, each
 * process keeps its own state in memory.
 */
export const redisField: FieldDef = {
  type: 'record',
  description:
    'Shared fleet state for several Kong nodes: `{host, port, username, password, database, tls, prefix, timeout_ms, node_ttl_ms}`. Without `host`, state stays in this process. Configure both plugins alike.',
  fields: [
    { host: { type: 'string', description: 'Redis host; unset keeps state in process.' } },
    { port: { type: 'integer', default: 6379, between: [1, 65535] } },
    { username: { type: 'string', referenceable: true, description: 'ACL user (Redis 6+).' } },
    {
      password: {
        type: 'string',
        referenceable: true,
        encrypted: true,
        description: 'A `{vault://...}` reference keeps it out of the declarative config.',
      },
    },
    { database: { type: 'integer', default: 0, between: [0, 15] } },
    { tls: { type: 'boolean', default: false } },
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
        description: 'A node silent this long is gone: its in-flight leases are released.',
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
