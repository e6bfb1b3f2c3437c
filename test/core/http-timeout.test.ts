import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ReplicaHttp } from '../../src/backends/http';

// A call's timeout is often what an access deadline leaves on a clock with fractions of a
// millisecond (AdapterManager `within`: a prefetch load whose spend took over a second got
// 9932.014 ms in test/kong/prefetch.test.ts). AbortSignal.timeout takes whole milliseconds only.
describe('a replica call bounded by a fractional timeout', () => {
  const http = new ReplicaHttp();
  let server: Server;
  let url: string;
  beforeAll(async () => {
    server = createServer((_req, res) => res.end('ok'));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/models`;
  });
  afterAll(async () => {
    await http.close();
    server.close();
  });

  it('is made, not refused before it starts', async () => {
    await expect(http.call('GET', url, 9932.014404296875)).resolves.toMatchObject({
      status: 200,
      text: 'ok',
    });
  });
});
