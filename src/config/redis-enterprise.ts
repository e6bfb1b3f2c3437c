import type { FieldError, SchemaFields } from './kong-schema';

/**
 * Kong Enterprise's Redis fields (rate-limiting-advanced and the Redis partials), so that a
 * record copied from there validates: each is mapped onto what ioredis can do, accepted without
 * effect where the plugins have nothing it could set, or refused saying what to write instead.
 * Names and defaults as Kong/sdk-konnect-go's models and the konnect Terraform provider 3.4.3
 * (`gateway_partial`, redis-ee) give them: `connect_timeout`, `send_timeout`, `read_timeout`
 * (ms, 2000 each), `keepalive_pool_size` (256), `keepalive_backlog`, `cluster_nodes`
 * (`{ip, port}`), `cluster_max_redirections` (5), `connection_is_proxied` (false). No defaults
 * here: unset, `timeout` bounds connecting and each call.
 */
/** An integer field of Kong Enterprise's record, between `min` and `max`, with no default. */
const integer = (name: string, min: number, max: number, description: string) => ({
  [name]: { type: 'integer' as const, between: [min, max] as [number, number], description },
});

const NO_EFFECT = "Accepted from Kong Enterprise's record, no effect";

export const enterpriseRedisFields: SchemaFields = [
  integer(
    'connect_timeout',
    10,
    60000,
    "Bound on connecting, in ms (Kong Enterprise's name). Unset: `timeout`.",
  ),
  integer(
    'send_timeout',
    10,
    60000,
    "Kong Enterprise's bound on sending a call, in ms. The client bounds a whole call (sent and answered) with one timer: the larger of `send_timeout` and `read_timeout`. Unset: `timeout`.",
  ),
  integer(
    'read_timeout',
    10,
    60000,
    "Kong Enterprise's bound on an answer, in ms; see `send_timeout`. Unset: `timeout`.",
  ),
  integer(
    'keepalive_pool_size',
    1,
    2147483646,
    `${NO_EFFECT}: each plugin process keeps one pipelined connection, not a pool.`,
  ),
  integer('keepalive_backlog', 0, 2147483646, `${NO_EFFECT} (see \`keepalive_pool_size\`).`),
  {
    cluster_nodes: {
      type: 'array',
      description:
        'Refused when set: Redis Cluster is not supported (the scripts touch keys in many hash slots). Use `host` or Sentinel.',
      elements: {
        type: 'record',
        fields: [
          { ip: { type: 'string', description: 'Cluster node host.' } },
          { port: { type: 'integer', between: [1, 65535], description: 'Cluster node port.' } },
        ],
      },
    },
  },
  integer('cluster_max_redirections', 0, 2147483646, `${NO_EFFECT} (no Redis Cluster).`),
  {
    connection_is_proxied: {
      type: 'boolean',
      description:
        "Kong Enterprise: Redis is reached through a proxy at `host` and `port`. Nothing changes for the client (it speaks plain Redis to the proxy); refused with Sentinel, whose primary's address would bypass the proxy.",
    },
  },
];

export interface EnterpriseRedis {
  connect_timeout?: number;
  send_timeout?: number;
  read_timeout?: number;
  keepalive_pool_size?: number;
  keepalive_backlog?: number;
  cluster_nodes?: { ip?: string; port?: number }[];
  cluster_max_redirections?: number;
  connection_is_proxied?: boolean;
}

/** What the schema language cannot say about Kong Enterprise's fields. */
export function checkEnterpriseRedis(
  c: EnterpriseRedis & { sentinel_master?: string },
  path: string,
): FieldError[] {
  const errors: FieldError[] = [];
  if (c.cluster_nodes !== undefined && c.cluster_nodes.length > 0)
    errors.push({
      field: `${path}.cluster_nodes`,
      message:
        "Redis Cluster is not supported (the plugins' scripts touch keys in many hash slots): set host and port of a standalone Redis, or sentinel_master with sentinel_nodes",
    });
  if (c.connection_is_proxied === true && c.sentinel_master !== undefined)
    errors.push({
      field: `${path}.connection_is_proxied`,
      message:
        'a proxied connection goes to host and port (the proxy), not through Sentinel: set host and port, or leave connection_is_proxied false',
    });
  return errors;
}

/** The client's bounds, in ms: on connecting, and on one call (sent, then answered). */
export function redisBounds(c: EnterpriseRedis & { timeout: number }): { connect: number; call: number } {
  const parts = [c.send_timeout, c.read_timeout].filter((t): t is number => t !== undefined);
  return { connect: c.connect_timeout ?? c.timeout, call: parts.length > 0 ? Math.max(...parts) : c.timeout };
}
