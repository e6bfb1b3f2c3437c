import { createHook } from 'node:async_hooks';
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

  // AbortSignal.timeout's timer fired after every call, however fast the answer, and made a
  // DOMException with a stack: about a tenth of what the replica polls cost the plugin server.
  it('leaves no timer to fire once it has its answer', async () => {
    const ms = 377; // no other timer of the process has this length
    const created = new Set<number>();
    let fired = 0;
    const hook = createHook({
      init: (id, type, _trigger, resource) => {
        if (type === 'Timeout' && (resource as { _idleTimeout?: number })._idleTimeout === ms)
          created.add(id);
      },
      before: (id) => void (created.has(id) && fired++),
    }).enable();
    try {
      await expect(http.call('GET', url, ms)).resolves.toMatchObject({ status: 200 });
      await new Promise((r) => setTimeout(r, ms + 200));
    } finally {
      hook.disable();
    }
    expect(created.size).toBeLessThanOrEqual(1);
    expect(fired).toBe(0);
  });

  it('still ends as a timeout when no answer comes', async () => {
    const silent = createServer(() => {}); // never answers
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const at = `http://127.0.0.1:${(silent.address() as AddressInfo).port}/metrics`;
    try {
      await expect(http.call('GET', at, 150)).rejects.toMatchObject({
        code: 'timeout',
        message: `GET ${at}: no answer within 150 ms`,
      });
    } finally {
      silent.closeAllConnections();
      silent.close();
    }
  });

  it('is made, not refused before it starts', async () => {
    await expect(http.call('GET', url, 9932.014404296875)).resolves.toMatchObject({
      status: 200,
      text: 'ok',
    });
  });
});
