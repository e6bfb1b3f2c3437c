/**
 * `lora-router`'s fields for what is served where: the replicas, the base model, the adapters
 * (listed, templated, static) and how many a replica may hold. A part of routerSchema
 * (router-schema.ts, which keeps the fields' order for Kong and docs/configuration.md), apart
 * because these name the fleet, where the other parts tune how requests are placed on it.
 */
import { DEFAULT_NAME_PATTERN } from '../../adapters/catalog';
import type { SchemaFields } from '../kong-schema';

export const fleetFields: SchemaFields = [
  {
    replicas: {
      type: 'array',
      required: true,
      len_min: 1,
      description: 'The GPU replicas serving the base model: `{url, backend, priority}` each.',
      elements: {
        type: 'record',
        fields: [
          {
            url: {
              type: 'string',
              required: true,
              match: '^https?://[^/%s]+:%d+/?$',
              description: '`http(s)://host:port` of the replica.',
            },
          },
          {
            backend: {
              type: 'string',
              default: 'vllm',
              one_of: ['vllm', 'llamacpp'],
              description: 'Server kind.',
            },
          },
          {
            priority: {
              type: 'integer',
              default: 0,
              description: 'Pool priority: higher pools take requests first while not saturated.',
            },
          },
        ],
      },
    },
  },
  {
    base_model: {
      type: 'string',
      description:
        "The model id the replicas serve as their base (vLLM's `--served-model-name`, else `--model`). A request naming it, or naming no `model`, is a base-model request: any replica may serve it (llama.cpp ones with every adapter's scale at 0), no adapter is loaded and adapter affinity does not apply. `/v1/models` lists it first and as each adapter's `parent`; no adapter may take its name. Unset: only a request with no `model` is one; a request naming the base model is taken for an adapter name (400 `invalid_model` when it contains `/`, else served or loaded as an adapter).",
    },
  },
  {
    adapters: {
      type: 'array',
      default: [],
      description:
        'Known adapters: `{name, path, static}`. `static` ones are registered at replica start and never loaded or unloaded by the router.',
      elements: {
        type: 'record',
        fields: [
          {
            name: {
              type: 'string',
              required: true,
              len_min: 1,
              len_max: 256,
              description:
                'The `model` clients send. No `,` unless `static`: vLLM reports the adapters it runs as names joined with `,`, so the router could not tell such an adapter idle.',
            },
          },
          {
            path: {
              type: 'string',
              description:
                'vLLM: the `lora_path` to load. llama.cpp: the file the replica was started with (matched by path or file name).',
            },
          },
          {
            static: {
              type: 'boolean',
              default: false,
              description: 'Registered at replica start: served only by holders, never loaded or unloaded.',
            },
          },
        ],
      },
    },
  },
  {
    adapter_path_template: {
      type: 'string',
      description:
        'Path of adapters not listed, with `{name}` (e.g. `/adapters/{name}`): any name matching `adapter_name_pattern` may then be loaded. Unset: an unlisted name is served only where a replica registered it at start, else 404.',
    },
  },
  {
    adapter_name_pattern: {
      type: 'string',
      default: DEFAULT_NAME_PATTERN,
      description:
        'JS regular expression a templated adapter name must match. A name it lets through with a `,` is never unloaded while the replica reports a running or waiting adapter list that could hold it (vLLM joins the names with `,`).',
    },
  },
  {
    max_loaded_adapters: {
      type: 'integer',
      default: 0,
      between: [0, 4096],
      description:
        'Runtime-loaded adapters per vLLM replica (keep below `--max-cpu-loras`: released vLLM keeps unloaded weights cached). 0: the router never loads or unloads.',
    },
  },
];
