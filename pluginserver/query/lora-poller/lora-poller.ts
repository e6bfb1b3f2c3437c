/**
 * `lora-poller` alone in a directory, for Kong >= 3.9's `query_cmd`: Kong registers only the first
 * plugin a query prints (docs/kong.md), so each plugin has a directory of its own
 * (docker/kong-3.9.conf). The plugin server names the plugin after this file.
 */
export { Plugin, Schema, Version, Priority } from '../../../plugins/lora-poller';
