/**
 * Review 59: the HTTP client's undici dispatch handler (src/backends/http.ts) against a stub
 * server on loopback. Each call is bounded by its own timeout, connect, headers and body together,
 * including a wait for one of the replica's connections.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ReplicaHttp } from '../../src/backends/http';

describe('a call queued behind busy connections to its replica', () => {
  // One connection: a slow load call holds it, a poll's call waits for it in undici's queue.
  const http = new ReplicaHttp({ connectionsPerReplica: 1 });
  let server: Server;
  let base: string;
  const held: ServerResponse[] = [];
  const asked: string[] = [];
  beforeAll(async () => {
    server = createServer((req: IncomingMessage, res: ServerResponse) => {
      asked.push(req.url ?? '');
      if (req.url === '/v1/load_lora_adapter')
        held.push(res); // answered when the test says
      else res.end('ok');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    for (const res of held) res.end('late');
    await http.close();
    server.closeAllConnections();
    server.close();
  });

  it('ends as a timeout within its own bound, not when the connection frees', async () => {
    const order: string[] = [];
    const load = http.call('POST', `${base}/v1/load_lora_adapter`, 3000, { lora_name: 'a' }).then(
      () => order.push('load answered'),
      (e: Error) => order.push(`load: ${e.message.replace(base, '')}`),
    );
    const poll = http.call('GET', `${base}/metrics`, 100).then(
      () => order.push('poll answered'),
      (e: Error) => order.push(`poll: ${e.message.replace(base, '')}`),
    );
    await Promise.race([poll, load]);
    // The load is answered only once the poll has settled (or at the load's own timeout, 3 s).
    for (const res of held.splice(0)) res.end('{}');
    await Promise.all([poll, load]);
    expect(order).toEqual(['poll: GET /metrics: no answer within 100 ms', 'load answered']);
    // The poll ended is not sent once the connection frees; the next call goes out on it.
    await expect(http.call('GET', `${base}/v1/models`, 3000)).resolves.toMatchObject({ text: 'ok' });
    expect(asked).toEqual(['/v1/load_lora_adapter', '/v1/models']);
  }, 10_000);
});
