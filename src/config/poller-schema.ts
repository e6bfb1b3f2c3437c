import type { SchemaFields } from './kong-schema';
import { redisField, type RedisConfig } from './redis-schema';

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
    jitter: {
      type: 'number',
      default: 0.1,
      between: [0, 0.5],
      description: 'Each interval varies by up to this fraction.',
    },
  },
  {
    endpoints: {
      type: 'set',
      default: ['status', 'metrics', 'page'],
      description:
        'What the route this plugin is attached to serves: `.../status` JSON, `.../metrics` Prometheus text, and the placement page at the route itself.',
      elements: { type: 'string', one_of: ['status', 'metrics', 'page'] },
    },
  },
  { redis: redisField },
];

export interface PollerConfig {
  poll_interval_ms: number;
  timeout_ms: number;
  jitter: number;
  endpoints: ('status' | 'metrics' | 'page')[];
  redis: RedisConfig;
}
