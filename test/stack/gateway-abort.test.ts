/**
 * The local gateway, like nginx (`proxy_ignore_client_abort off`), cancels the upstream request
 * when the client goes away before the response, buffered or not: the replica stops working on
 * it and the router's in-flight count goes back to 0. Through the real plugin server.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { KongDriver, PluginServerProcess } from '../../harness/kong/driver';
import { onDemand, startWorld, usePluginServer, vllm } from '../kong/world';
import { waitFor } from '../../harness/wait';

let driver: KongDriver;
usePluginServer((_s: PluginServerProcess, d) => {
  driver = d;
});

it.each([
  ['buffered (response_buffering on)', true],
  ['streamed route, non-streaming request', false],
])('a client that goes away mid-request cancels it upstream: %s', async (_what, buffering) => {
  // timeScale 1: 2000 tokens take far longer than the test's bounds.
  const w = await startWorld(driver, [vllm({ timeScale: 1 })], (u) => onDemand(u), {
    responseBuffering: buffering,
  });
  const server = http.createServer((req, res) => void w.service.serve(req, res));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const port = (server.address() as AddressInfo).port;
  try {
    expect((await w.chat('a')).status).toBe(200); // loaded: the next request only decodes
    const replica = w.fleet.replicas[0]!;
    const body = JSON.stringify({
      model: 'a',
      messages: [{ role: 'user', content: 'hi' }],
      max_tokens: 2000,
      min_tokens: 2000,
    });
    const req = http.request({
      host: '127.0.0.1',
      port,
      method: 'POST',
      path: '/v1/chat/completions',
      headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
    });
    req.on('error', () => undefined);
    req.end(body);
    await waitFor(() => replica.engine.inFlight('a') === 1, 5000, 'the replica runs the request');
    expect((await w.statusJson()).inFlight).toBe(1);
    req.destroy();
    await waitFor(() => replica.engine.inFlight('a') === 0, 5000, 'the replica sees the request closed');
    await waitFor(async () => (await w.statusJson()).inFlight === 0, 5000, 'in-flight back to 0');
  } finally {
    server.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
    await w.stop();
  }
});
