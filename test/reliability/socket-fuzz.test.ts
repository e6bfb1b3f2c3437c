/**
 * The real plugin server's socket fuzzed (pluginserver/socket.ts): over 10,000 messages of random
 * bytes, mutations of the messages Kong sent for a real request, truncated, joined, split and
 * oversized ones. After each connection's bytes the server answers Kong's next call (a HandleEvent
 * for an instance it does not hold), and after each batch of 60 connections the same process
 * routes the driver's next real request through lora-router to a simulated replica.
 * Seeded: a failure prints the seed and path fast-check needs to replay it
 * (`SOCKET_FUZZ_SEED=<seed>`); the same choices then apply to a corpus whose instance ids (from the
 * clock) and replica port differ. `SOCKET_FUZZ_REPORT=1` prints messages per second.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { decode } from '@msgpack/msgpack';
import fc from 'fast-check';
import { scanValue } from '../../pluginserver/frames';
import { MAX_MESSAGE_BYTES } from '../../pluginserver/socket';
import { KongDriver, type PluginServerProcess } from '../../harness/kong/driver';
import { exchange, request } from '../kong/raw-socket';
import { BASE, startWorld, startPluginServer, vllm } from '../kong/world';

const SEED = Number(process.env.SOCKET_FUZZ_SEED ?? 33);
const BATCHES = 110;
const CASES_PER_BATCH = 60;
const MIN_MESSAGES = 10_000;
/** Connections open at once within a batch. */
const PARALLEL = 12;

/** One connection's worth of bytes: its writes, how many messages they hold, and what to expect. */
interface Case {
  kind: string;
  writes: Buffer[];
  messages: number;
  /** Requests Kong sent, whole and unchanged: each must be answered. */
  answered?: number;
}

/** Records the messages the driver sends, on their way to the server. */
async function recordingProxy(target: string, dir: string) {
  const path = join(dir, 'recorder.sock');
  const recorded: Buffer[] = [];
  let recording = true;
  const proxy = net.createServer((client) => {
    const upstream = net.connect(target);
    let pending = Buffer.alloc(0);
    client.on('data', (chunk: Buffer) => {
      upstream.write(chunk);
      if (!recording) return;
      // Cut into messages: the socket may have joined or split the driver's writes.
      pending = Buffer.concat([pending, chunk]);
      for (let scan = scanValue(pending, 0, MAX_MESSAGE_BYTES); scan.kind === 'whole'; ) {
        recorded.push(pending.subarray(0, scan.end));
        pending = pending.subarray(scan.end);
        scan = scanValue(pending, 0, MAX_MESSAGE_BYTES);
      }
    });
    upstream.on('data', (chunk: Buffer) => client.write(chunk));
    const end = () => (client.destroy(), upstream.destroy());
    client.on('close', end).on('error', end);
    upstream.on('close', end).on('error', end);
  });
  await new Promise<void>((r) => proxy.listen(path, r));
  return {
    path,
    recorded,
    stopRecording: () => (recording = false),
    close: () => new Promise((r) => proxy.close(r)),
  };
}

const u32 = (n: number) => {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n);
  return b;
};

/** A counterexample prints as its kind and write sizes (the bytes replay from the seed). */
const printable = (c: Case): Case =>
  Object.assign(c, {
    [fc.toStringMethod]: () => `${c.kind} [${c.writes.map((w) => w.length).join(', ')} bytes]`,
  });

function caseArbitrary(recorded: Buffer[]): fc.Arbitrary<Case> {
  const frame = fc.constantFrom(...recorded);
  /** 1 to 4 byte edits: overwrite, insert, delete, or a length-ish byte made huge. */
  const mutated = fc
    .tuple(
      frame,
      fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 3 }), fc.integer({ min: 0, max: 255 })), {
        minLength: 1,
        maxLength: 4,
      }),
    )
    .map(([f, edits]) => {
      const b = [...f];
      for (const [at, op, byte] of edits) {
        const i = at % (b.length || 1);
        if (op === 0) b[i] = byte;
        else if (op === 1) b.splice(i, 0, byte);
        else if (op === 2 && b.length > 1) b.splice(i, 1);
        else b[i] = 0xff;
      }
      return Buffer.from(b);
    });
  /** Cut points for a buffer, as fractions of its length. */
  const cuts = fc.array(fc.double({ min: 0, max: 1, noNaN: true }), { minLength: 1, maxLength: 5 });
  const split = (b: Buffer, at: number[]) => {
    const points = [...new Set(at.map((x) => Math.floor(x * b.length)))]
      .filter((p) => p > 0)
      .sort((x, y) => x - y);
    return [0, ...points].map((p, i) => b.subarray(p, points[i] ?? b.length));
  };
  const anyRequest = fc.tuple(
    fc.oneof(
      fc.constantFrom('plugin.HandleEvent', 'plugin.Step', 'plugin.CloseInstance', 'plugin.StartInstance'),
      fc.string({ maxLength: 30 }).map((s) => `plugin.${s}`),
      fc.string({ maxLength: 30 }),
    ),
    fc.oneof(
      fc.record({ InstanceId: fc.oneof(fc.integer(), fc.string()), EventName: fc.string({ maxLength: 10 }) }),
      fc.record({ EventId: fc.integer(), Data: fc.anything() }),
      fc.anything({ maxDepth: 3 }),
    ),
  );
  // Strays a socket meets: an HTTP client (curl --unix-socket), a TLS hello, a line of text.
  const strays = [
    'GET / HTTP/1.1\r\nHost: localhost\r\nUser-Agent: curl/7.88.1\r\nAccept: */*\r\n\r\n',
    '\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03',
    'PING\n',
  ].map((t) => Buffer.from(t, 'latin1'));
  const cases: fc.Arbitrary<Case>[] = [
    fc.constantFrom(...strays).map((b) => ({ kind: 'stray', writes: [b], messages: 1 })),
    fc
      .uint8Array({ minLength: 1, maxLength: 256 })
      .map((b) => ({ kind: 'random', writes: [Buffer.from(b)], messages: 1 })),
    mutated.map((b) => ({ kind: 'mutated', writes: [b], messages: 1 })),
    fc.tuple(frame, fc.double({ min: 0, max: 1, noNaN: true, maxExcluded: true })).map(([f, x]) => ({
      kind: 'truncated',
      writes: [f.subarray(0, Math.max(1, Math.floor(x * f.length)))],
      messages: 1,
    })),
    fc.array(frame, { minLength: 2, maxLength: 4 }).map((fs) => ({
      kind: 'joined',
      writes: [Buffer.concat(fs)],
      messages: fs.length,
      answered: fs.length,
    })),
    fc.tuple(fc.array(frame, { minLength: 1, maxLength: 3 }), cuts).map(([fs, at]) => ({
      kind: 'split',
      writes: split(Buffer.concat(fs), at),
      messages: fs.length,
      answered: fs.length,
    })),
    fc.tuple(fc.array(fc.oneof(frame, mutated), { minLength: 2, maxLength: 4 }), cuts).map(([fs, at]) => ({
      kind: 'mutated, joined and split',
      writes: split(Buffer.concat(fs), at),
      messages: fs.length,
    })),
    fc
      .tuple(
        fc.constantFrom(0xc6, 0xc9, 0xdb, 0xdd, 0xdf),
        fc.integer({ min: MAX_MESSAGE_BYTES + 1, max: 2 ** 32 - 1 }),
        fc.boolean(),
      )
      .map(([header, length, inRequest]) => {
        const announced = Buffer.concat([Buffer.from([header]), u32(length), Buffer.from('abc')]);
        // Inside a request's args: [0, 7, "plugin.Step", [<oversized>]].
        const prefix = Buffer.concat([
          Buffer.from([0x94, 0x00, 0x07, 0xab]),
          Buffer.from('plugin.Step'),
          Buffer.from([0x91]),
        ]);
        return {
          kind: 'oversized',
          writes: [inRequest ? Buffer.concat([prefix, announced]) : announced],
          messages: 1,
        };
      }),
    anyRequest.map(([method, arg]) => ({
      kind: 'any request',
      writes: [request(1, method, arg)],
      messages: 1,
    })),
  ];
  return fc.oneof(...cases).map(printable);
}

/** The plugin server's exit and last words, if it died. */
function died(): string | undefined {
  if (!server.exited) return undefined;
  return `plugin server died (${server.child.exitCode ?? server.child.signalCode}):\n${server.log.slice(-12).join('\n')}`;
}

let server: PluginServerProcess;
let driver: KongDriver;
let world: Awaited<ReturnType<typeof startWorld>>;
let proxy: Awaited<ReturnType<typeof recordingProxy>>;
let dir: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'socket-fuzz-'));
  ({ server } = await startPluginServer());
  proxy = await recordingProxy(server.socketPath, dir);
  // The world's driver talks through the recorder: its first requests are the corpus.
  driver = new KongDriver(proxy.path);
  world = await startWorld(driver, [vllm()], (urls) => ({
    replicas: urls.map((url) => ({ url })),
    base_model: BASE,
  }));
  for (let i = 0; i < 2; i++) expect((await world.chat(BASE)).status).toBe(200);
  proxy.stopRecording();
}, 60_000);

afterAll(async () => {
  await world?.stop();
  driver?.close();
  await proxy?.close();
  await server?.stop();
  rmSync(dir, { recursive: true, force: true });
});

it('survives 10,000 fuzzed messages on its socket, answering Kong after each connection and routing after each batch', async () => {
  const pid = server.child.pid;
  // The corpus: Kong's real sequence (GetPluginInfo, StartInstance, HandleEvent, the Steps).
  const methods = new Set(proxy.recorded.map((b) => (decode(b) as unknown[])[2]));
  expect([...methods]).toEqual(
    expect.arrayContaining(['plugin.StartInstance', 'plugin.HandleEvent', 'plugin.Step']),
  );
  /**
   * After each connection: Kong's next call on a connection of its own is answered. The cheapest
   * one Kong makes: a HandleEvent for an instance the server does not hold (a worker's id from
   * before a restart), answered "no plugin instance" (mp_rpc.lua `Rpc:handle_event` then starts one).
   * Starting an instance each time would cost the run minutes; the batch's routed request does it.
   */
  const kongCallAnswered = () =>
    expect(driver.call('plugin.HandleEvent', { InstanceId: 1, EventName: 'access' })).rejects.toThrow(
      'no plugin instance #1',
    );
  let messages = 0;
  let kongCalls = 0;
  const kinds = new Map<string, number>();
  const started = Date.now();
  await fc.assert(
    fc.asyncProperty(
      fc.array(caseArbitrary(proxy.recorded), { minLength: CASES_PER_BATCH, maxLength: CASES_PER_BATCH }),
      async (cases) => {
        const queue = [...cases];
        const unanswered: string[] = [];
        const sent = Promise.all(
          Array.from({ length: PARALLEL }, async () => {
            for (let c = queue.shift(); c; c = queue.shift()) {
              const r = await exchange(server.socketPath, c.writes, {
                replies: c.answered,
                end: c.answered === undefined,
                gapMs: 1,
                waitMs: 5000,
              });
              if (c.answered !== undefined && r.replies.length < c.answered)
                unanswered.push(`${c.kind}: ${r.replies.length} of ${c.answered} answered`);
              await kongCallAnswered();
              kongCalls++;
              messages += c.messages;
              kinds.set(c.kind, (kinds.get(c.kind) ?? 0) + c.messages);
            }
          }),
        );
        // A connection refused means the process is gone: say so, with its last words.
        await sent.catch((err: unknown) => {
          throw new Error(died() ?? String(err));
        });
        expect(died()).toBeUndefined();
        expect(unanswered).toEqual([]);
        // Kong's next real request: routed and answered by the same process.
        expect(server.child.pid).toBe(pid);
        expect((await world.chat(BASE)).status).toBe(200);
      },
    ),
    { seed: SEED, numRuns: BATCHES, endOnFailure: true },
  );
  expect(messages).toBeGreaterThanOrEqual(MIN_MESSAGES);
  expect(kongCalls).toBe(BATCHES * CASES_PER_BATCH);
  if (process.env.SOCKET_FUZZ_REPORT)
    console.info(
      `${messages} messages in ${(Date.now() - started) / 1000} s: ${Math.round((messages * 1000) / (Date.now() - started))}/s`,
      Object.fromEntries(kinds),
    );
}, 600_000);
