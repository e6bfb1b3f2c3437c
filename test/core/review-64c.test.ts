/**
 * Review of c5d0ac9 (review 64b: the log phase tells "a request of this node ended there" only of
 * one whose answer's source is 'service', asked before the release while a poll of its replica is
 * under way). Two requests it still told of, though no poll's reading can have been theirs:
 * - A client that gave up (499): Kong leaves `lua_check_client_abort` off, so a client gone during
 *   the access phase (a wait for room, an adapter's load) is found gone only once nginx began
 *   proxying (ngx_http_upstream_check_broken_connection), which may close the upstream connection
 *   before the request was written. Kong set KONG_PROXIED before the balancer and no error_page
 *   covers 499 (Kong/kong 3.9.3 kong/init.lua `Kong.access`, kong/templates/nginx_kong.lua), so
 *   `get_source` says 'service'.
 * - A poll begun during the source's PDK round trip: the request had ended at the replica before its
 *   log phase began, yet the tell was dated at the release, after the round trip.
 * Either excused an adapter a router this node cannot see runs (docs/reliability.md, "An adapter
 * someone unseen routes is held").
 */
import { monotonic } from '../../src/clock';
import { silentLogger } from '../../src/log';
import { LeaseHandle } from '../../src/lease';
import { busyReading, residentWatched } from '../helpers/unseen-hold';
import { logPhase } from '../../src/router/log-phase';
import { FleetRuntime } from '../../src/runtime';

const U = 'http://10.0.0.1:8000';

const reading = busyReading;

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

let rt: FleetRuntime;
afterEach(() => {
  jest.restoreAllMocks();
  rt.stop();
});

/** `c` resident on U, a poll of U under way; what the runtime's judge holds of a reading of `c` running. */
async function setUp(): Promise<{
  held: string[];
  record: { lease: string; replica: string; stage: 'holder'; adapter: string };
}> {
  let held: string[];
  ({ rt, held } = await residentWatched(U, 'c'));
  jest.spyOn(rt.poller, 'polling').mockImplementation((url) => url === U);
  const { lease } = LeaseHandle.takeNow(rt, U, 'c')!;
  return { held, record: { lease: lease.id, replica: U, stage: 'holder', adapter: 'c' } };
}

it('holds what runs after a request the client gave up on (499: it may never have reached the replica)', async () => {
  const { held, record } = await setUp();
  const started = monotonic(rt.clock);
  await pause(2);
  await logPhase(rt, record, 499, () => Promise.resolve('service'));
  await rt.poller.onReading!(U, reading(['c']), started);
  expect(held).toEqual(['c']);
});

it('holds what a poll begun during the log phase reads running (the request ended before its log phase)', async () => {
  const { held, record } = await setUp();
  let begun = 0;
  // Kong's answer takes a round trip; a poll of U begins meanwhile.
  const source = async () => {
    await pause(2);
    begun = monotonic(rt.clock);
    await pause(2);
    return 'service';
  };
  await logPhase(rt, record, 200, source);
  expect(begun).toBeGreaterThan(0);
  await rt.poller.onReading!(U, reading(['c']), begun);
  expect(held).toEqual(['c']);
});

it('still excuses what a poll begun before the log phase read running (it may have been this request)', async () => {
  const { held, record } = await setUp();
  const started = monotonic(rt.clock);
  await pause(2);
  await logPhase(rt, record, 200, async () => {
    await pause(2);
    return 'service';
  });
  await rt.poller.onReading!(U, reading(['c']), started);
  expect(held).toEqual([]);
});

it('asks Kong nothing more of a 499 (it is never told as served)', async () => {
  const { record } = await setUp();
  const source = jest.fn(async () => 'service');
  await logPhase(rt, record, 499, source);
  expect(source).not.toHaveBeenCalled();
});

it('keeps the latest end told: an earlier one told after it moves nothing back', async () => {
  rt = new FleetRuntime({ log: silentLogger });
  const word = rt.manager.replicaWord;
  word.servedEnded(U, 'c', 10);
  word.servedEnded(U, 'c', 5);
  expect(word.servedEndedSince(U, 'c', 8)).toBe(true);
});

describe('the tell reaches the runtime whose poll may have read the request', () => {
  let next: FleetRuntime | undefined;
  afterEach(() => next?.stop());

  it('a lease taken before a `redis` record change, the poll on the runtime polling now: both told', async () => {
    const { record } = await setUp();
    next = new FleetRuntime({ log: silentLogger });
    // Stepped down (`retire` sets it first): polling and new decisions are the successor's.
    rt.successor = next;
    jest.spyOn(rt.poller, 'polling').mockReturnValue(false);
    jest.spyOn(next.poller, 'polling').mockImplementation((url) => url === U);
    const started = monotonic(rt.clock);
    await pause(2);
    await logPhase(rt, record, 200, async () => 'service');
    expect(next.manager.replicaWord.servedEndedSince(U, 'c', started)).toBe(true);
    expect(rt.manager.replicaWord.servedEndedSince(U, 'c', started)).toBe(true);
  });
});

it("asks no source of a base model's request while its replica is polled (the hold reads adapters only)", async () => {
  rt = new FleetRuntime({ log: silentLogger });
  await rt.store.upsertReplica({ url: U, backend: 'vllm', priority: 0 });
  jest.spyOn(rt.poller, 'polling').mockImplementation((url) => url === U);
  const { lease } = LeaseHandle.takeNow(rt, U, null)!;
  const source = jest.fn(async () => 'service');
  await logPhase(rt, { lease: lease.id, replica: U, stage: 'holder', adapter: null }, 200, source);
  expect(source).not.toHaveBeenCalled();
});

it("marks nothing down for Kong's own 500 asked while a poll is under way (only its 502/504 say the replica failed)", async () => {
  const { record } = await setUp();
  const applied = jest.spyOn(rt.store, 'applySnapshot');
  await logPhase(rt, record, 500, async () => 'error');
  expect(applied).not.toHaveBeenCalled();
});
