/**
 * Kong's nginx workers each start their own instance of a plugin config (docs/kong.md; kong-pdk
 * 0.6.0 server.js `StartInstance` makes a new plugin object each time): the requests held in the
 * gateway, which `slo_classes` orders and bounds by (src/router/slo-class.ts HeldClasses), must be
 * counted across them, as docs/routing.md says ("per process and per configuration").
 */
import { Plugin } from '../../plugins/lora-router';
import { heldOn, type HeldClasses } from '../../src/router/slo-class';

const config = {
  replicas: [{ url: 'http://127.0.0.1:1/' }],
  saturation_mode: 'predicted',
  slo_classes: [
    { name: 'interactive', ttft_ms: 2000, priority: 0 },
    { name: 'batch', ttft_ms: 30000, priority: -1 },
  ],
  default_slo_class: 'interactive',
};

const heldOf = (p: unknown) => (p as { service: { held: HeldClasses } }).service.held;

it('two workers’ instances of one config count the same held requests', () => {
  const worker1 = new Plugin(config);
  const worker2 = new Plugin(config);
  // Three interactive requests held on worker 1: three times the one replica, a backlog.
  for (let i = 0; i < 3; i++) heldOf(worker1).enter(0);
  expect(heldOf(worker1).backlogged(0)).toBe(true);
  // Worker 2 must see them: else its holds' ends read no backlog, and a batch request never
  // waits behind a held interactive one on another worker (`above`).
  expect(heldOf(worker2).backlogged(0)).toBe(true);
  expect(heldOf(worker2).above(-1)).toBe(true);
});

it('separate runtimes (the simulations’ Kong nodes, one process) count apart', () => {
  const node0 = {};
  const node1 = {};
  const c = { replicas: [{ url: 'http://r:8000' }] } as Parameters<typeof heldOn>[1];
  heldOn(node0, c).enter(0);
  expect(heldOn(node0, c).above(-1)).toBe(true);
  expect(heldOn(node1, c).above(-1)).toBe(false);
});
