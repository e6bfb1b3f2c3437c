import type { SchemaFields } from './kong-schema';
import { redisField, type RedisConfig } from './redis-schema';

/** Polls in a row that must time out before a replica is marked down, by default. */
export const DEFAULT_UNHEALTHY_TIMEOUTS = 2;

/** `lora-poller`'s configuration. */
export const pollerSchema: SchemaFields = [
  {
    poll_interval_ms: {
      type: 'integer',
      default: 500,
      between: [50, 600000],
      description: 'How often each replica is polled.',
    },
  },
  {
    timeout_ms: {
      type: 'integer',
      default: 1000,
      between: [10, 60000],
      description: 'Bound on one poll of one replica.',
    },
  },
  {
    unhealthy_timeouts: {
      type: 'integer',
      default: DEFAULT_UNHEALTHY_TIMEOUTS,
      between: [1, 100],
      description:
        "Polls in a row that must time out before a replica is marked down (one slow `/metrics` does not send its adapters' traffic cold elsewhere). A refused connection or an error answer marks it down at once; a successful poll starts the count again. Kong's upstreams count timeouts the same way (`healthchecks.active.unhealthy.timeouts`, a success clears the count) but default it to 0, which never marks a target down for timeouts.",
    },
  },
  {
    jitter: {
      type: 'number',
      default: 0.1,
      between: [0, 0.5],
      description: 'Each interval varies by up to this fraction.',
    },
  },
  {
    base_path: {
      type: 'string',
      default: '/lora',
      match: '^/[%w%-%._~/]*$',
      description:
        'Where it answers: the placement page at the base path, `/status` and `/metrics` below it. Every other path passes through untouched (one PDK call), so it may be attached to a service or globally.',
    },
  },
  {
    endpoints: {
      type: 'set',
      default: ['status', 'metrics', 'page'],
      description:
        'Which of its paths it answers: `status` (JSON), `metrics` (Prometheus text), `page` (the placement page); the others get 404.',
      elements: { type: 'string', one_of: ['status', 'metrics', 'page'] },
    },
  },
  { redis: redisField },
];

export interface PollerConfig {
  poll_interval_ms: number;
  timeout_ms: number;
  unhealthy_timeouts: number;
  jitter: number;
  base_path: string;
  endpoints: ('status' | 'metrics' | 'page')[];
  redis: RedisConfig;
}
