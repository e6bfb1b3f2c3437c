import { RouterError } from '../../src/errors';
import { classifyPath, modelIdOf, parseBody, promptText } from '../../src/router/request';

describe('classifyPath', () => {
  it.each([
    ['/v1/chat/completions', 'inference'],
    ['/llm/v1/completions/', 'inference'],
    ['/v1/models', 'models'],
    ['/v1/models/', 'models'],
    ['/v1/models/sql-lora', 'model'],
    ['/v1/models/meta-llama%2FLlama-3.1-8B-Instruct', 'model'],
    ['/v1/models/meta-llama/Llama-3.1-8B-Instruct', 'model'],
    ['/v1/embeddings', 'inference'],
    ['/v1/rerank', 'inference'],
    ['/v1/audio/transcriptions', 'other'],
    ['/v1/load_lora_adapter', 'admin'],
    ['/llm/v1/unload_lora_adapter', 'admin'],
    ['//v1//load_lora_adapter', 'admin'],
    ['/v1/./load_lora_adapter', 'admin'],
    ['/v1%2Fload_lora_adapter', 'admin'],
    ['/V1/LOAD_LORA_ADAPTER', 'admin'],
    ['/lora-adapters', 'admin'],
    ['/lora-adapters/', 'admin'],
    ['/_sim/fault', 'admin'],
    ['/slots', 'admin'],
    ['/v1/lora-adapters-report', 'other'],
  ])('%s is %s', (path, cls) => {
    expect(classifyPath(path)).toBe(cls);
  });
});

describe('modelIdOf', () => {
  it.each([
    ['/v1/models/sql-lora', 'sql-lora'],
    ['/v1/models/Sql-Lora/', 'Sql-Lora'],
    ['/v1/models/meta-llama%2FLlama-3.1-8B-Instruct', 'meta-llama/Llama-3.1-8B-Instruct'],
    ['/llm//v1/models/meta-llama/Llama-3.1-8B-Instruct', 'meta-llama/Llama-3.1-8B-Instruct'],
  ])('%s names %s, its case kept', (path, id) => {
    expect(modelIdOf(path)).toBe(id);
  });
});

describe('parseBody', () => {
  const err = (fn: () => unknown) => {
    try {
      fn();
    } catch (e) {
      return [(e as RouterError).status, (e as RouterError).code];
    }
    return 'accepted';
  };
  it('reads model from a JSON object, as a string or a Buffer', () => {
    expect(parseBody('{"model":"a","messages":[]}', 'inference', 1000)).toEqual({
      json: { model: 'a', messages: [] },
      text: '{"model":"a","messages":[]}',
      model: 'a',
    });
    expect(parseBody(Buffer.from('{"model":"a"}'), 'inference', 1000).model).toBe('a');
    expect(parseBody('', 'other', 1000)).toEqual({ json: null });
    expect(parseBody(undefined, 'other', 1000)).toEqual({ json: null });
  });
  it('refuses what it cannot route, with the right status', () => {
    expect(err(() => parseBody(undefined, 'inference', 1000))).toEqual([413, 'request_too_large']);
    expect(err(() => parseBody('x'.repeat(1001), 'inference', 1000))).toEqual([413, 'request_too_large']);
    expect(err(() => parseBody('', 'inference', 1000))).toEqual([400, 'invalid_request']);
    expect(err(() => parseBody('{"model":', 'inference', 1000))).toEqual([400, 'invalid_json']);
    expect(err(() => parseBody('[1]', 'inference', 1000))).toEqual([400, 'invalid_json']);
    expect(err(() => parseBody('{"model":5}', 'inference', 1000))).toEqual([400, 'invalid_model']);
    expect(err(() => parseBody('{"messages":[]}', 'inference', 1000))).toEqual([400, 'invalid_model']);
    const deep = '['.repeat(100000) + ']'.repeat(100000);
    // V8 parses deep nesting; only a body for a llama.cpp replica has a depth bound (LLAMA_MAX_DEPTH).
    expect(parseBody(`{"model":"a","x":${deep}}`, 'inference', 10_000_000).model).toBe('a');
  });
});

describe('promptText', () => {
  it('joins chat text parts and truncates', () => {
    expect(
      promptText(
        { messages: [{ content: 'ab' }, { content: [{ type: 'text', text: 'cd' }, { type: 'image_url' }] }] },
        100,
      ),
    ).toBe('abcd');
    expect(promptText({ prompt: 'hello world' }, 5)).toBe('hello');
    expect(promptText({ messages: 'nope' }, 5)).toBeUndefined();
    expect(promptText(null, 5)).toBeUndefined();
  });
});

describe('parseBody with msgpack bin', () => {
  it('reads a plain Uint8Array (what the plugin server decodes bin to) as UTF-8 text', () => {
    const bytes = new TextEncoder().encode('{"model":"é-lora"}');
    const view = new Uint8Array(bytes.buffer, 0, bytes.length);
    expect(parseBody(view, 'inference', 1000).model).toBe('é-lora');
  });
});
