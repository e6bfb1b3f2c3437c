/**
 * Redis back from an older snapshot (dst seed 1038807), through the real plugin server driven as
 * Kong drives it: the node that unloaded adapter `a` after the snapshot sends no request for it to
 * the replica once Redis, restarted from that snapshot, says `a` is loaded there again. The polls
 * are quiet (a 10-minute interval): no poll begun after the return reads the replica, so the node
 * must keep reading `a` `unloading` rather than route on the snapshot. The replica's own records
 * are the check. test/core/snapshot-restart.test.ts has the same with polls going on.
 */
import { randomBytes } from 'node:crypto';
import type http from 'node:http';
import { RedisServer } from '../../harness/redis/server';
import { waitFor } from '../../harness/wait';
import { KongDriver, PluginServerProcess } from '../../harness/kong/driver';
import { json, onDemand, startWorld, usePluginServer, vllm } from './world';

let server: PluginServerProcess;
let driver: KongDriver;
usePluginServer((s, d) => {
  server = s;
  driver = d;
});

let redis: RedisServer;
beforeAll(async () => {
  // The harness turns automatic saves off (`--save ""`) and gives the server a tmp `--dir`.
  redis = await RedisServer.start({ args: ['--dbfilename', 'older.rdb'] });
});
afterAll(async () => {
  await redis.close();
});

it('after a restart from a snapshot taken before its unload, the plugin server sends no request for the unloaded adapter to the replica', async () => {
  // Kong's 2 s timeout, not ours of 200 ms: on a loaded machine (a CI replay beside other work) the
  // first load's budget spend timed out, the node decided alone with no peer seen yet, granted no
  // cold load and answered 429. This test is about the snapshot, not about a slow Redis.
  const record = {
    host: '127.0.0.1',
    port: redis.port,
    prefix: `srk${randomBytes(4).toString('hex')}:`,
    timeout: 2000,
  };
  const w = await startWorld(
    driver,
    [vllm()],
    (u) =>
      onDemand(u, {
        max_loaded_adapters: 1,
        stale_after_ms: 3_600_000,
        queue_timeout_ms: 2000,
        redis: record,
      }),
    {},
    600_000,
  );
  try {
    const replica = w.fleet.replicas[0]!;
    expect((await w.chat('a')).status).toBe(200);
    expect(await redis.command(['SAVE'])).toBe('OK');
    expect((await w.chat('b')).status).toBe(200);
    expect(replica.adapterLog().map((e) => `${e.op} ${e.name} ${e.status}`)).toEqual([
      'load a 200',
      'unload a 200',
      'load b 200',
    ]);

    // Killed, and started again on its port from the snapshot: `a` loaded, `b` unknown there.
    const logged = server.log.length;
    await redis.stop();
    await redis.start();
    await waitFor(
      () => server.log.slice(logged).some((l) => l.includes('shared fleet state is back')),
      15_000,
      'the node sharing decisions again',
    );

    const seen: { held: string[]; status: number }[] = [];
    replica.onRequest = (req: http.IncomingMessage, res: http.ServerResponse) => {
      if (!req.url?.startsWith('/v1/chat/completions')) return;
      const held = replica.registered();
      res.on('finish', () => seen.push({ held, status: res.statusCode }));
    };
    const logMark = replica.adapterLog().length;
    const r = await w.chat('a');
    // The one request reached the replica with `a` there again, and was served. On the code without
    // `sharedAgain`: `[{ held: ['b'], status: 404 }]`, vLLM's "The model `a` does not exist.".
    expect(seen).toEqual([{ held: ['a'], status: 200 }]);
    expect({ status: r.status, body: r.status === 200 ? '' : json(r.body) }).toEqual({
      status: 200,
      body: '',
    });
    // `a` came back by a load the node made after the return, after `b` was unloaded for it.
    const since = replica.adapterLog().slice(logMark);
    expect(since.map((e) => `${e.op} ${e.name} ${e.status}`)).toEqual(['unload b 200', 'load a 200']);
  } finally {
    await w.stop();
  }
}, 60_000);
