import { forEachSample, parsePrometheus } from '../../src/metrics/prometheus';
import { readLlamacppLoad, readVllmLoad } from '../../src/metrics/replica-load';

describe('Prometheus text parser', () => {
  it('parses comments, labels with escapes, special values, timestamps and histograms', () => {
    const text = [
      '# HELP http_requests_total The total. With "quotes" \\ and more',
      '# TYPE http_requests_total counter',
      'http_requests_total{method="post",code="200"} 1027 1395066363000',
      'http_requests_total{method="post",code="400"}    3 1395066363000',
      'http_requests_created{method="post"} 1.7e+09',
      'msdos_file_access_time_seconds{path="C:\\\\DIR\\\\FILE.TXT",error="Cannot find file:\\n\\"FILE.TXT\\""} 1.458255915e9',
      'metric_without_timestamp_and_labels 12.47',
      'something_weird{problem="division by zero"} +Inf -3982045',
      'nan_metric NaN',
      'neg_inf -Inf',
      '  ',
      'rpc_duration_seconds_bucket{le="0.05"} 24054',
      'rpc_duration_seconds_bucket{le="+Inf"} 144320',
      'rpc_duration_seconds_sum 1.7560473e+07',
      'rpc_duration_seconds_count 2693',
      'trailing_comma{a="1",} 5',
      'crlf_line 7\r',
    ].join('\n');
    const { samples, stats } = parsePrometheus(text);
    expect(stats.malformed).toBe(0);
    const by = (n: string) => samples.filter((s) => s.name === n);
    expect(by('http_requests_total').map((s) => [s.labels, s.value])).toEqual([
      [{ method: 'post', code: '200' }, 1027],
      [{ method: 'post', code: '400' }, 3],
    ]);
    expect(by('http_requests_created')[0]!.value).toBe(1.7e9);
    expect(by('msdos_file_access_time_seconds')[0]!.labels).toEqual({
      path: 'C:\\DIR\\FILE.TXT',
      error: 'Cannot find file:\n"FILE.TXT"',
    });
    expect(by('metric_without_timestamp_and_labels')[0]).toEqual({
      name: 'metric_without_timestamp_and_labels',
      labels: {},
      value: 12.47,
    });
    expect(by('something_weird')[0]!.value).toBe(Infinity);
    expect(by('nan_metric')[0]!.value).toBeNaN();
    expect(by('neg_inf')[0]!.value).toBe(-Infinity);
    expect(by('rpc_duration_seconds_bucket').map((s) => s.labels.le)).toEqual(['0.05', '+Inf']);
    expect(by('rpc_duration_seconds_sum')[0]!.value).toBe(1.7560473e7);
    expect(by('trailing_comma')[0]!.labels).toEqual({ a: '1' });
    expect(by('crlf_line')[0]!.value).toBe(7);
  });

  it('skips malformed lines, counts them, and keeps the rest', () => {
    const text = [
      'good 1',
      '{no_name="x"} 1',
      'bad_value abc',
      'unterminated{a="x} 1',
      'no_value',
      'bad_label{a=x} 1',
      'also_good{b="2"} 2',
    ].join('\n');
    const { samples, stats } = parsePrometheus(text);
    expect(samples.map((s) => s.name)).toEqual(['good', 'also_good']);
    expect(stats).toEqual({ samples: 2, malformed: 5 });
  });

  it('builds label maps only for the families asked for', () => {
    const seen: Record<string, string>[] = [];
    forEachSample(
      'a{x="1"} 1\nb{y="2"} 2',
      (_n, l) => seen.push(l),
      (n) => n === 'b',
    );
    expect(seen).toEqual([{ y: '2' }]);
  });

  it('with a map for a filter, copies labels only where the map says so, and checks every line whole', () => {
    const seen: [string, Record<string, string>, number][] = [];
    const stats = forEachSample(
      [
        'a{x="1"} 1.0',
        'b{y="2"} 2',
        'bb{y="3"} 3',
        'c{z="with \\"quote\\" and \\\\"} 4',
        'skipped{w="x} 5',
        'skipped{w="\\"} 6',
        'a 0.0',
      ].join('\n'),
      (n, l, v) => seen.push([n, l, v]),
      new Map([
        ['a', false],
        ['b', true],
        ['c', true],
      ]),
    );
    expect(seen).toEqual([
      ['a', {}, 1],
      ['b', { y: '2' }, 2],
      ['c', { z: 'with "quote" and \\' }, 4],
      ['a', {}, 0],
    ]);
    expect(stats).toEqual({ samples: 5, malformed: 2 });
  });
});

describe('replica load from /metrics', () => {
  it('reads vLLM queues and KV, summing data-parallel engines, and the latest lora_requests_info', () => {
    const text = [
      'vllm:num_requests_running{engine="0",model_name="m"} 6.0',
      'vllm:num_requests_running{engine="1",model_name="m"} 2.0',
      'vllm:num_requests_waiting{engine="0",model_name="m"} 3.0',
      'vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.42',
      'vllm:kv_cache_usage_perc{engine="1",model_name="m"} 0.61',
      'vllm:lora_requests_info{max_lora="4",running_lora_adapters="",waiting_lora_adapters=""} 1.7456009871234567e+09',
      'vllm:lora_requests_info{max_lora="4",running_lora_adapters="sql-lora,chat-lora",waiting_lora_adapters="x"} 1.7456010123456788e+09',
      'vllm:lora_requests_info{max_lora="4",running_lora_adapters="old",waiting_lora_adapters=""} 1.7456000000000000e+09',
    ].join('\n');
    expect(readVllmLoad(text)).toEqual({
      running: 8,
      waiting: 3,
      kvUsage: 0.61,
      activeAdapters: ['chat-lora', 'sql-lora', 'x'],
      reportsActivity: true,
      malformedLines: 0,
      source: 'metrics',
    });
  });

  it("reads vLLM's per-request prompt-token and prefill-time histogram sums, summing engines", () => {
    const text = [
      'vllm:num_requests_running{engine="0",model_name="m"} 1.0',
      'vllm:request_prompt_tokens_sum{engine="0",model_name="m"} 12000.0',
      'vllm:request_prompt_tokens_sum{engine="1",model_name="m"} 8000.0',
      'vllm:request_prompt_tokens_count{engine="0",model_name="m"} 3.0',
      'vllm:request_prefill_time_seconds_sum{engine="0",model_name="m"} 2.5',
      'vllm:request_prefill_time_seconds_sum{engine="1",model_name="m"} 1.5',
      'vllm:request_prefill_time_seconds_bucket{engine="0",le="+Inf",model_name="m"} 3.0',
    ].join('\n');
    const load = readVllmLoad(text);
    expect(load.finishedPromptTokens).toBe(20_000);
    expect(load.prefillSeconds).toBe(4);
  });

  it("reads vLLM's per-request decode-time and generation-token histograms (sums and count), summing engines", () => {
    const text = [
      'vllm:request_generation_tokens_sum{engine="0",model_name="m"} 900.0',
      'vllm:request_generation_tokens_sum{engine="1",model_name="m"} 300.0',
      'vllm:request_generation_tokens_count{engine="0",model_name="m"} 3.0',
      'vllm:request_generation_tokens_count{engine="1",model_name="m"} 1.0',
      'vllm:request_generation_tokens_bucket{engine="0",le="+Inf",model_name="m"} 3.0',
      'vllm:request_decode_time_seconds_sum{engine="0",model_name="m"} 27.0',
      'vllm:request_decode_time_seconds_sum{engine="1",model_name="m"} 9.0',
      'vllm:request_decode_time_seconds_count{engine="0",model_name="m"} 3.0',
    ].join('\n');
    const load = readVllmLoad(text);
    expect(load.generationTokens).toBe(1200);
    expect(load.finishedRequests).toBe(4);
    expect(load.decodeSeconds).toBe(36);
  });

  it('says whether the replica reports activity: an empty lora_requests_info is idle, none is unknown', () => {
    const idle =
      'vllm:lora_requests_info{max_lora="1",running_lora_adapters="",waiting_lora_adapters=""} 1.7e+09';
    expect(readVllmLoad(idle)).toMatchObject({ activeAdapters: [], reportsActivity: true });
    // --disable-log-stats: no vllm: family at all.
    expect(readVllmLoad('python_info{version="3.12.11"} 1.0').reportsActivity).toBeUndefined();
  });

  it('reads a name with a comma as active whenever the joined labels may carry it, never as idle then', () => {
    // vLLM writes each label as the names joined with ',' (PrometheusStatLogger.record,
    // vllm/v1/metrics/loggers.py): 'team,a' running reads as 'team,a', or as 'team' and 'a'.
    const info = (running: string, waiting = '') =>
      `vllm:lora_requests_info{max_lora="4",running_lora_adapters="${running}",waiting_lora_adapters="${waiting}"} 1.7e+09`;
    const asked = ['team,a', 'a,b', 'team,b', 'x'];
    expect(readVllmLoad(info('team,a'), asked).activeAdapters).toEqual(['a', 'team', 'team,a']);
    // 'team,a,b' may be team,a and b, or team and a,b: both are busy.
    expect(readVllmLoad(info('team,a,b'), asked).activeAdapters).toEqual(['a', 'a,b', 'b', 'team', 'team,a']);
    expect(readVllmLoad(info('', 'x,team,b'), asked).activeAdapters).toEqual(['b', 'team', 'team,b', 'x']);
    // Whole names only: 'team,ab' does not carry 'team,a'; a name is never read across the two labels.
    expect(readVllmLoad(info('team,ab'), asked).activeAdapters).toEqual(['ab', 'team']);
    expect(readVllmLoad(info('team', 'a'), asked).activeAdapters).toEqual(['a', 'team']);
    expect(readVllmLoad(info(''), asked)).toMatchObject({ activeAdapters: [], reportsActivity: true });
  });

  describe('which lora_requests_info series says what runs: the latest, unless the values cannot be read as times', () => {
    const info = (running: string, value: number) =>
      `vllm:lora_requests_info{max_lora="4",running_lora_adapters="${running}",waiting_lora_adapters=""} ${value}`;
    // The replica's clock by its own Date header, in seconds.
    const now = 1_750_000_000;

    it('a clock stepped back: a series from before the step outlives the current one, so none is read as idle', () => {
      // Idle at now + 60 s, then the clock stepped back a minute; b runs since, its series set to the
      // replica's time (set_to_current_time, PrometheusStatLogger.record, vllm/v1/metrics/loggers.py).
      const text = [info('', now + 60), info('b', now - 1)].join('\n');
      expect(readVllmLoad(text, [], now)).toMatchObject({ activeAdapters: ['b'], reportsActivity: true });
      // Every series is a time not after the replica's own: the latest wins.
      expect(
        readVllmLoad([info('a', now - 30), info('', now - 1)].join('\n'), [], now).activeAdapters,
      ).toEqual([]);
      // Within the Date header's resolution and uvicorn's once-a-second refresh of it.
      expect(
        readVllmLoad([info('a', now - 30), info('', now + 1.5)].join('\n'), [], now).activeAdapters,
      ).toEqual([]);
    });

    it('several API server processes (--api-server-count > 1): summed timestamps mean the replica cannot say', () => {
      // multiprocess_mode="sum" (vllm/v1/metrics/loggers.py): a label set two processes wrote is
      // the sum of their times, and wins over the set a process running a request writes now.
      const text = [info('', 2 * now - 100), info('a', now - 1)].join('\n');
      const load = readVllmLoad(text, [], now);
      expect(load.reportsActivity).toBeUndefined();
      expect(load.activeAdapters).toEqual([]);
    });
  });

  it('reads one text again with the names and time of each call, and each answer is the caller’s own', () => {
    const info = (running: string, value: number) =>
      `vllm:lora_requests_info{max_lora="4",running_lora_adapters="${running}",waiting_lora_adapters=""} ${value}`;
    const now = 1_750_000_000;
    // The names asked about and the replica's time apply per call (a comma name, a clock stepped
    // back, summed times).
    const text = [
      info('team,a', now + 60),
      info('b', now - 1),
      'vllm:lora_adapter_loaded{adapter_name="b",level="gpu"} 1',
    ].join('\n');
    const first = readVllmLoad(text);
    expect(first.activeAdapters).toEqual(['a', 'team']);
    expect(readVllmLoad(text, ['team,a']).activeAdapters).toEqual(['a', 'team', 'team,a']);
    expect(readVllmLoad(text, [], now).activeAdapters).toEqual(['a', 'b', 'team']);
    expect(readVllmLoad(text, [], now / 2).reportsActivity).toBeUndefined();
    // Each answer is the caller's own: changing one changes no later read.
    first.activeAdapters.push('gone');
    first.residency!.gpu.push('gone');
    expect(readVllmLoad(text)).toEqual({
      ...first,
      activeAdapters: ['a', 'team'],
      residency: { gpu: ['b'], cpu: [] },
    });
  });

  it('falls back to the deprecated gpu_cache_usage_perc, and prefers the new name when both exist', () => {
    expect(readVllmLoad('vllm:gpu_cache_usage_perc{engine="0"} 0.3').kvUsage).toBe(0.3);
    expect(readVllmLoad('vllm:gpu_cache_usage_perc 0.3\nvllm:kv_cache_usage_perc 0.5').kvUsage).toBe(0.5);
    expect(readVllmLoad('').kvUsage).toBeUndefined();
  });

  it('reads newer vLLM: waiting by reason and residency by level (a series at 0 is absent)', () => {
    const l = 'engine="0",model_name="m"';
    const text = [
      `vllm:num_requests_waiting{${l}} 3.0`,
      `vllm:num_requests_waiting_by_reason{${l},reason="capacity"} 1.0`,
      `vllm:num_requests_waiting_by_reason{${l},reason="deferred"} 2.0`,
      `vllm:lora_adapter_loaded{adapter_name="a",${l},level="gpu",pinned="false"} 1.0`,
      `vllm:lora_adapter_loaded{adapter_name="a",${l},level="cpu",pinned="false"} 1.0`,
      `vllm:lora_adapter_loaded{adapter_name="b",${l},level="cpu",pinned="true"} 1.0`,
      `vllm:lora_adapter_loaded{adapter_name="gone",${l},level="cpu",pinned="false"} 0.0`,
    ].join('\n');
    // Waiting for capacity, as released vLLM counts it; the deferred ones apart.
    expect(readVllmLoad(text)).toMatchObject({
      waiting: 1,
      waitingDeferred: 2,
      residency: { gpu: ['a'], cpu: ['a', 'b'] },
    });
    expect(readVllmLoad(`vllm:num_requests_waiting{${l}} 3.0`).residency).toBeUndefined();
  });

  it('reads llama.cpp processing and deferred requests, with no KV usage', () => {
    expect(
      readLlamacppLoad(
        'llamacpp:requests_processing 2\nllamacpp:requests_deferred 5\nllamacpp:n_decode_total 9',
      ),
    ).toEqual({
      running: 2,
      waiting: 5,
      activeAdapters: [],
      malformedLines: 0,
      source: 'metrics',
    });
  });
});
