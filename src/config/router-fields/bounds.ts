/**
 * `lora-router`'s fields that bound a request's waits and costs: load and queue timeouts (their
 * sum within Kong's 60 s RPC timeout), staleness, lease age, load backoff, the cold-load budgets
 * and the body size. A part of routerSchema (router-schema.ts keeps the fields' order), apart
 * because each is a limit a guarantee of docs/reliability.md is stated against.
 */
import type { SchemaFields } from '../kong-schema';

export const boundFields: SchemaFields = [
  {
    load_timeout_ms: {
      type: 'integer',
      // Loads take 0.1-3 s (docs/replica-apis.md); 10 s leaves room for the queue's 29 s.
      default: 10000,
      between: [1, 27000],
      description:
        "Bound on one adapter load or unload call. `refresh_timeout_ms + queue_timeout_ms + 2 x load_timeout_ms` must stay within 55 s: Kong's RPC to the plugin server times out at 60 s.",
    },
  },
  {
    queue_timeout_ms: {
      type: 'integer',
      default: 29000,
      between: [0, 55000],
      description:
        'How long a cold request may wait for an adapter slot before 503. With `room_wait: escalate`, counted from its arrival; with `replica` or `anywhere`, per wait. See `load_timeout_ms` for the bound on the sum.',
    },
  },
  {
    stale_after_ms: {
      type: 'integer',
      default: 2000,
      between: [1, 3600000],
      description: 'A replica snapshot older than this is unknown, not idle.',
    },
  },
  {
    refresh_timeout_ms: {
      type: 'integer',
      default: 1000,
      between: [1, 60000],
      description: 'Bound on the router refreshing a replica itself when no fresh snapshot exists.',
    },
  },
  {
    lease_max_age_ms: {
      type: 'integer',
      default: 600000,
      between: [1000, 86400000],
      description:
        "An in-flight count whose log phase never came is reclaimed once not renewed for this long (counted in `lora_router_leases_expired_total`). Kong skips a log phase when its timers are exhausted, or a node dies. A poll that finds the lease's adapter running or waiting on the replica renews it (a base-model lease: any request running or waiting there); for replicas that do not report that (llama.cpp, vLLM with `--disable-log-stats`), keep it above the longest request Kong may proxy: the default is twice kong.yml's `read_timeout` (300 s). It also sets how long a replica a changed configuration no longer lists is kept: the configuration it replaced lapses once no request has used it for the longest `lease_max_age_ms` (at least 60 s); without Redis its replicas are then no longer polled, and what the gateway process keeps of them goes (with Redis, once no node routes to them).",
    },
  },
  {
    backoff_base_ms: {
      type: 'integer',
      default: 1000,
      between: [0, 3600000],
      description: 'Wait after a failed load of an adapter on a replica; doubles per failure.',
    },
  },
  {
    backoff_max_ms: {
      type: 'integer',
      default: 60000,
      between: [0, 3600000],
      description: 'Upper bound of that wait.',
    },
  },
  {
    cold_loads_per_minute: {
      type: 'integer',
      default: 6000,
      between: [0, 1000000],
      description:
        'Adapter loads the fleet may start per minute (counted in Redis when configured, else per Kong node). A request that would start one past it gets 429 with `Retry-After`; requests for resident adapters are never counted nor refused. 0: no bound.',
    },
  },
  {
    cold_loads_per_consumer_per_minute: {
      type: 'integer',
      default: 600,
      between: [0, 1000000],
      description:
        'The same per Kong consumer, when an authentication plugin identified one (read only for a request that would start a load). 0: no bound.',
    },
  },
  {
    max_body_bytes: {
      type: 'integer',
      default: 10485760,
      between: [1024, 1073741824],
      description:
        'Larger request bodies get 413. Kong >= 3.8.0 reads a body nginx spooled past `nginx_http_client_body_buffer_size` back from its file up to this size; set `nginx_http_client_max_body_size` to it, since a spooled body past it cannot be handed over (500). Kong < 3.8.0 reads no spooled body: keep it <= the buffer there.',
    },
  },
];
