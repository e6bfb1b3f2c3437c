import { createServer, type Server } from 'node:net';
import type { AddressInfo } from 'node:net';
import { ReplicaHttp } from '../../src/backends/http';

// A replica's answer as the router's HTTP client reads it (src/backends/http.ts): the text as
// undici's `body.text()` gave it (a UTF-8 BOM left out), the status of the final answer after an
// informational one, and the replica's clock from its `Date` header when it sends one.

function rawServer(reply: string | Buffer): Promise<{ url: string; server: Server }> {
  const server = createServer((socket) => {
    socket.once('data', () => socket.end(reply));
  });
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () =>
      resolve({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/metrics`, server }),
    ),
  );
}

const answer = (head: string, body: Buffer) =>
  Buffer.concat([
    Buffer.from(`${head}content-length: ${body.length}\r\nconnection: close\r\n\r\n`, 'latin1'),
    body,
  ]);

describe("a replica's answer", () => {
  const http = new ReplicaHttp();
  afterAll(() => http.close());

  it('is its text without a leading BOM, and no clock without a Date', async () => {
    const body = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('größe 1\n', 'utf8')]);
    const { url, server } = await rawServer(answer('HTTP/1.1 200 OK\r\n', body));
    try {
      const r = await http.call('GET', url, 2000);
      expect(r).toEqual({ status: 200, text: 'größe 1\n' });
    } finally {
      server.close();
    }
  });

  it("is the final answer's after an informational one, with the replica's clock", async () => {
    const { url, server } = await rawServer(
      answer(
        'HTTP/1.1 103 Early Hints\r\nlink: </a.css>; rel=preload\r\n\r\nHTTP/1.1 503 Service Unavailable\r\ndate: Sun, 06 Dec 2026 16:00:00 GMT\r\n',
        Buffer.from('busy'),
      ),
    );
    try {
      const r = await http.call('GET', url, 2000);
      expect(r).toEqual({ status: 503, text: 'busy', dateS: Date.UTC(2026, 11, 6, 16) / 1000 });
    } finally {
      server.close();
    }
  });
});
