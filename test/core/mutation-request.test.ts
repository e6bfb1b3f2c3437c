/**
 * The request parser (src/router/request.ts) alone: bad input answered in OpenAI's error format
 * (status, `error.code`, `error.message`), the methods each class of path takes, the path's
 * normalisation and the prompt text the prefix index reads. Written against the mutants that
 * request.test.ts left alive (docs/reliability/mutation-testing.md).
 */
import { RouterError } from '../../src/errors';
import { allowedMethods, classifyPath, modelIdOf, parseBody, promptText } from '../../src/router/request';

/** The error `f` throws, as the client gets it: status and OpenAI's `{error: {message, type, code}}`. */
function refusal(f: () => unknown): { status: number; code: string; message: string; type: string } {
  try {
    f();
  } catch (err) {
    if (!(err instanceof RouterError)) throw err;
    const { error } = err.body();
    return { status: err.status, code: error.code, message: error.message, type: error.type };
  }
  throw new Error('no refusal');
}

describe('parseBody: bad input answered in OpenAI’s error format', () => {
  it('a body Kong could not hand over: 413 for an inference request, nothing for another path', () => {
    for (const body of [undefined, null]) {
      expect(refusal(() => parseBody(body, 'inference', 100))).toMatchObject({
        status: 413,
        code: 'request_too_large',
        type: 'invalid_request_error',
      });
      expect(parseBody(body, 'other', 100)).toEqual({ json: null });
    }
  });

  it('counts the size in bytes, not characters, and takes a body of exactly the limit', () => {
    const text = JSON.stringify({ model: 'm', p: 'é'.repeat(10) }); // 10 more bytes than characters
    expect(refusal(() => parseBody(text, 'inference', text.length))).toMatchObject({
      status: 413,
      code: 'request_too_large',
      message: `Request body exceeds the ${text.length}-byte limit.`,
    });
    const bytes = Buffer.byteLength(text);
    expect(parseBody(text, 'inference', bytes).model).toBe('m');
    expect(parseBody(new TextEncoder().encode(text), 'inference', bytes).model).toBe('m');
    expect(refusal(() => parseBody(new TextEncoder().encode(text), 'inference', bytes - 1)).status).toBe(413);
  });

  it('an empty body: 400 for an inference request, saying so; nothing for another path', () => {
    expect(refusal(() => parseBody('', 'inference', 100))).toMatchObject({
      status: 400,
      code: 'invalid_request',
      message: 'The request body is empty; expected a JSON object.',
    });
    expect(parseBody(new Uint8Array(0), 'other', 100)).toEqual({ json: null });
  });

  it('a body that is not JSON, or not a JSON object: 400 invalid_json, with its reason', () => {
    expect(refusal(() => parseBody('{"model": ', 'inference', 100))).toMatchObject({
      status: 400,
      code: 'invalid_json',
      message: 'The request body could not be parsed: it is not valid JSON.',
    });
    for (const body of ['[]', 'null', '"text"', '5', 'true', '[{"model": "m"}]']) {
      expect(refusal(() => parseBody(body, 'other', 100))).toMatchObject({
        status: 400,
        code: 'invalid_json',
        message: 'The request body must be a JSON object.',
      });
    }
  });

  it("'model': a string when given, required (and not empty) only for an inference request", () => {
    expect(refusal(() => parseBody('{"model": 5}', 'other', 100))).toMatchObject({
      status: 400,
      code: 'invalid_model',
      message: "'model' must be a string.",
    });
    expect(parseBody('{"x": 1}', 'other', 100)).toEqual({
      json: { x: 1 },
      text: '{"x": 1}',
      model: undefined,
    });
    expect(parseBody('{"model": ""}', 'other', 100).model).toBe('');
    for (const body of ['{}', '{"model": ""}']) {
      expect(refusal(() => parseBody(body, 'inference', 100))).toMatchObject({
        status: 400,
        code: 'invalid_model',
        message: "'model' is required.",
      });
    }
  });
});

describe('the methods each class of path takes', () => {
  it('POST for inference, GET and HEAD for the model list and a card, no rule otherwise', () => {
    expect(allowedMethods('inference')).toEqual(['POST']);
    expect(allowedMethods('models')).toEqual(['GET', 'HEAD']);
    expect(allowedMethods('model')).toEqual(['GET', 'HEAD']);
    expect(allowedMethods('other')).toBeUndefined();
    expect(allowedMethods('admin')).toBeUndefined();
  });
});

describe('path normalisation', () => {
  it('a trailing /. segment is dropped like an inner one', () => {
    expect(classifyPath('/v1/models/.')).toBe('models');
    expect(classifyPath('/v1/chat/completions/.')).toBe('inference');
  });

  it('a path that does not decode is classified as written, never dropped', () => {
    expect(classifyPath('/%zz/v1/load_lora_adapter')).toBe('admin');
    expect(classifyPath('/v1/chat/completions%zz')).toBe('other');
    expect(modelIdOf('/v1/models/a%zz')).toBe('a%zz');
  });

  it('a path that names no model has the empty id', () => {
    expect(modelIdOf('/v1/chat/completions')).toBe('');
  });
});

describe('promptText', () => {
  it('takes the leading text up to the bound, across messages and parts, skipping what is not text', () => {
    const json = {
      messages: [
        null,
        { content: 'aaaa' },
        { content: 5 },
        { content: [null, { text: 7 }, { text: 'bbbb' }] },
      ],
    };
    expect(promptText(json, 6)).toBe('aaaabb');
    expect(promptText(json, 100)).toBe('aaaabbbb');
    expect(promptText({ prompt: 'abcdef' }, 4)).toBe('abcd');
    expect(promptText({ prompt: 5 }, 4)).toBeUndefined();
    expect(promptText(null, 4)).toBeUndefined();
  });
});
