/**
 * `lora-router`'s fields for how a request is placed: the scorers' weights (one per scorer
 * descriptor), the wait for room, eviction, the picker, prefetching ahead of demand, and the
 * decision headers. A part of routerSchema (router-schema.ts keeps the fields' order), apart
 * because these choose among replicas, where the other parts say which may be chosen.
 */
import { SCORERS } from '../../scheduler/scorers';
import type { ScorerDescriptor } from '../../scheduler/types';
import type { FieldDef, SchemaFields } from '../kong-schema';

export const placementFields: SchemaFields = [
  { scorer_weights: scorerWeightsField(SCORERS) },
  {
    room_wait: {
      type: 'string',
      default: 'escalate',
      one_of: ['escalate', 'replica', 'anywhere'],
      description:
        'A cold request whose chosen replica has no idle adapter to unload: `escalate` waits for room on any replica (after `replica_wait_ms` on the chosen one) and answers 503 only `queue_timeout_ms` after it came; `replica` waits on the chosen replica, 503 after `queue_timeout_ms`; `anywhere` (experimental) waits for room on any replica, `queue_timeout_ms` per wait. The benchmark section measures the trade.',
    },
  },
  {
    replica_wait_ms: {
      type: 'integer',
      default: 0,
      between: [0, 600000],
      description:
        'With `room_wait: escalate`: how long a cold request waits for an idle adapter on the replica it chose before it waits for room on any replica (0: it goes there only if that replica can load now).',
    },
  },
  {
    eviction: {
      type: 'string',
      default: 'lru',
      one_of: ['lru', 'value'],
      description:
        'Which idle adapter makes room: `lru` (least recently used) or `value` (experimental: least decayed request frequency per copy in the fleet, recency breaking ties).',
    },
  },
  {
    picker: {
      type: 'string',
      default: 'p2c',
      one_of: ['p2c', 'max-score'],
      description: 'Power of two choices, or the highest score.',
    },
  },
  {
    prefetch: {
      type: 'boolean',
      default: false,
      description:
        'Placement ahead of demand: every `prefetch_interval_ms` one Kong node of the fleet loads the adapters requests ask for most into free slots of idle replicas (nothing waiting), copies in proportion to demand, through the usual load path and the cold-load budget. See docs/routing.md.',
    },
  },
  {
    prefetch_half_life_ms: {
      type: 'integer',
      default: 60000,
      between: [1000, 3600000],
      description:
        "Half-life of the decayed request counts that measure each adapter's demand (a fixed number of adapters is tracked per node).",
    },
  },
  {
    prefetch_interval_ms: {
      type: 'integer',
      default: 5000,
      between: [500, 600000],
      description:
        "How often prefetching plans, on the poller's timer (fleet-wide: one node plans a window).",
    },
  },
  {
    prefetch_hysteresis: {
      type: 'number',
      default: 1,
      between: [0, 10],
      description:
        "A copy is made only when an adapter's target (its share of demand times the fleet's slots) exceeds its copies by this many, and a copy is displaced only when its adapter stays within this many of its own target: no copy is made and dropped in turn.",
    },
  },
  {
    prefetch_evict_factor: {
      type: 'number',
      default: 8,
      between: [1, 1000],
      description:
        "A prefetch may unload an idle adapter (the usual unload path, with its guards) only when that adapter's demand times this is below the newcomer's.",
    },
  },
  {
    prefetch_loads_per_minute: {
      type: 'integer',
      default: 30,
      between: [0, 1000000],
      description:
        'Prefetch loads the fleet may start per minute; never more than a quarter of `cold_loads_per_minute` when that is set, so requests keep at least half of every minute of that budget. Each also counts against `cold_loads_per_minute`. A unit taken for a load that then makes no load call goes to another load of the same tick, or back to both budgets when the tick ends.',
    },
  },
  {
    decision_headers: {
      type: 'boolean',
      default: false,
      description:
        'Add `X-Lora-Replica` and `X-Lora-Stage` to the response (2 more PDK calls; the decision is always in `kong.ctx.shared.lora_router`).',
    },
  },
];

/** `scorer_weights`: one field per scorer descriptor, so a new scorer needs no schema edit. */
export function scorerWeightsField(scorers: readonly ScorerDescriptor[]): FieldDef {
  return {
    type: 'record',
    description:
      'Weights of the load-aware scorers after the filters (`src/scheduler/scorers/`); 0 turns one off.',
    fields: scorers.map((d) => ({
      [d.configKey]: {
        type: 'number',
        default: d.defaultWeight,
        between: [0, 100],
        description: `${d.experimental ? 'Experimental. ' : ''}\`${d.name}\` (${d.tendency}): higher for ${d.scoresHigher}.`,
      },
    })),
  };
}
