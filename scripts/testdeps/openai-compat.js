// Compatibility suite of Switchboard's OpenAI-compatible endpoint (/v1)
// with the official `openai` npm package. Run by app/openai_compat_test.go,
// which starts the whole app on the fake model server and sets:
//   SB_BASE_URL  the server's /v1 URL
//   SB_TOKEN     the owner's token
//   SB_IMAGE     a small PNG as a data URL
// The fake model answers "echo: <text>" (JSON made from the schema when
// response_format asks for it); the texts "FAIL 500", "FAIL 429" and
// "CUT" make it fail (the Go test scripts that). Every case runs in order
// under node's test runner; a failed one fails the Go test.
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const OpenAI = require('openai');

const baseURL = process.env.SB_BASE_URL;
const apiKey = process.env.SB_TOKEN;
if (!baseURL || !apiKey) {
  console.error('SB_BASE_URL and SB_TOKEN are required');
  process.exit(2);
}
// No retries: a retried POST would be a second message.
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 60_000 });
const model = 'switchboard';
const user = (text) => [{ role: 'user', content: text }];

// expectError runs fn and returns the error it throws, checking its class.
async function expectError(fn, cls) {
  try {
    await fn();
  } catch (err) {
    assert.ok(err instanceof cls, `want ${cls.name}, got ${err && err.constructor && err.constructor.name}: ${err}`);
    assert.ok(err instanceof OpenAI.APIError, 'every error is an APIError');
    return err;
  }
  assert.fail(`want ${cls.name}, got success`);
}

test('models: list and retrieve', async () => {
  const ids = [];
  for await (const m of client.models.list()) ids.push(m.id);
  assert.deepEqual(ids, [model]);
  const m = await client.models.retrieve(model);
  assert.equal(m.id, model);
  assert.equal(m.object, 'model');
  const err = await expectError(() => client.models.retrieve('gpt-4o'), OpenAI.NotFoundError);
  assert.equal(err.status, 404);
  assert.equal(err.code, 'model_not_found');
});

test('chat completion: non-streaming, with usage', async () => {
  const res = await client.chat.completions.create({ model, messages: user('hello from node') });
  assert.equal(res.object, 'chat.completion');
  assert.equal(res.model, model);
  assert.equal(res.choices.length, 1);
  assert.equal(res.choices[0].message.role, 'assistant');
  assert.equal(res.choices[0].message.content, 'echo: hello from node');
  assert.equal(res.choices[0].finish_reason, 'stop');
  assert.ok(res.usage.prompt_tokens > 0 && res.usage.completion_tokens > 0);
  assert.equal(res.usage.total_tokens, res.usage.prompt_tokens + res.usage.completion_tokens);
});

test('chat completion: settings are accepted (max_tokens, temperature, stop, system message)', async () => {
  const res = await client.chat.completions.create({
    model,
    messages: [{ role: 'system', content: 'Be terse.' }, ...user('settings check')],
    max_tokens: 33, temperature: 0.5, stop: ['ZZZ'],
  });
  assert.equal(res.choices[0].message.content, 'echo: settings check');
});

test('streaming with stream_options.include_usage', async () => {
  const stream = await client.chat.completions.create({
    model, messages: user('stream to node'), stream: true, stream_options: { include_usage: true },
  });
  let text = '';
  let finish = null;
  let usage = null;
  for await (const chunk of stream) {
    assert.equal(chunk.object, 'chat.completion.chunk');
    for (const c of chunk.choices) {
      text += c.delta.content || '';
      if (c.finish_reason) finish = c.finish_reason;
    }
    if (chunk.usage) {
      assert.equal(chunk.choices.length, 0, 'the usage chunk has no choices');
      usage = chunk.usage;
    }
  }
  assert.equal(text, 'echo: stream to node');
  assert.equal(finish, 'stop');
  assert.ok(usage && usage.prompt_tokens > 0 && usage.total_tokens === usage.prompt_tokens + usage.completion_tokens);
  // The helper that accumulates a stream sees the same answer.
  const runner = client.chat.completions.stream({ model, messages: user('stream helper') });
  const done = await runner.finalChatCompletion();
  assert.equal(done.choices[0].message.content, 'echo: stream helper');
});

test('unknown model: 404 model_not_found', async () => {
  const err = await expectError(
    () => client.chat.completions.create({ model: 'gpt-4o', messages: user('hi') }), OpenAI.NotFoundError);
  assert.equal(err.status, 404);
  assert.equal(err.code, 'model_not_found');
  assert.equal(err.param, 'model');
});

test('unsupported fields: 400 naming the field', async () => {
  for (const [extra, param] of [
    [{ tools: [{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: {} } } }] }, 'tools'],
    [{ tool_choice: 'required' }, 'tool_choice'],
    [{ n: 2 }, 'n'],
    [{ logprobs: true }, 'logprobs'],
    [{ top_logprobs: 2 }, 'top_logprobs'],
  ]) {
    const err = await expectError(
      () => client.chat.completions.create({ model, messages: user('refuse me'), ...extra }), OpenAI.BadRequestError);
    assert.equal(err.status, 400);
    assert.equal(err.param, param);
    assert.equal(err.type, 'invalid_request_error');
    assert.match(err.message, new RegExp(param));
  }
});

test('oversize body: 413 naming the limit', async () => {
  const err = await expectError(
    () => client.chat.completions.create({ model, messages: user('x'.repeat(5 << 20)) }), OpenAI.APIError);
  assert.equal(err.status, 413);
  assert.equal(err.code, 'request_too_large');
  assert.match(err.message, /4 MiB/);
});

test('authentication: a wrong key is AuthenticationError', async () => {
  const bad = new OpenAI({ baseURL, apiKey: 'not-the-token-0000000000', maxRetries: 0 });
  const err = await expectError(() => bad.models.list(), OpenAI.AuthenticationError);
  assert.equal(err.status, 401);
  assert.equal(err.code, 'invalid_api_key');
});

test('unknown route: NotFoundError', async () => {
  const err = await expectError(() => client.get('/embeddings'), OpenAI.NotFoundError);
  assert.equal(err.code, 'unknown_url');
});

test('model failure: 5xx InternalServerError, 429 RateLimitError with Retry-After', async () => {
  let err = await expectError(
    () => client.chat.completions.create({ model, messages: user('FAIL 500') }), OpenAI.InternalServerError);
  assert.equal(err.status, 502);
  assert.equal(err.code, 'model_error');
  assert.equal(err.type, 'server_error');
  err = await expectError(
    () => client.chat.completions.create({ model, messages: user('FAIL 429') }), OpenAI.RateLimitError);
  assert.equal(err.status, 429);
  assert.equal(err.headers.get('retry-after'), '3');
  // Before any text was streamed, a streaming request gets the status too.
  err = await expectError(async () => {
    const s = await client.chat.completions.create({ model, messages: user('FAIL 500'), stream: true });
    for await (const _ of s) { /* nothing arrives */ }
  }, OpenAI.InternalServerError);
  assert.equal(err.status, 502);
});

test('model failure mid-stream: the SDK raises the error event', async () => {
  const stream = await client.chat.completions.create({ model, messages: user('CUT'), stream: true });
  let text = '';
  const err = await expectError(async () => {
    for await (const chunk of stream) {
      for (const c of chunk.choices) text += c.delta.content || '';
    }
  }, OpenAI.APIError);
  assert.equal(err.code, 'model_error');
  assert.equal(err.type, 'server_error');
  assert.ok(text.length > 0, 'text arrived before the error');
});

test('response_format json_schema: round trip', async () => {
  const schema = {
    type: 'object',
    properties: { city: { type: 'string' }, days: { type: 'integer', minimum: 1 }, tags: { type: 'array', items: { type: 'string' } } },
    required: ['city', 'days', 'tags'], additionalProperties: false,
  };
  const res = await client.chat.completions.parse({
    model, messages: user('plan a trip'),
    response_format: { type: 'json_schema', json_schema: { name: 'trip', strict: true, schema } },
  });
  const msg = res.choices[0].message;
  assert.deepEqual(msg.parsed, { city: 'plan a trip', days: 1, tags: ['plan a trip'] });
  assert.deepEqual(JSON.parse(msg.content), msg.parsed);
  const obj = await client.chat.completions.create({
    model, messages: user('as an object'), response_format: { type: 'json_object' },
  });
  assert.deepEqual(JSON.parse(obj.choices[0].message.content), { echo: 'as an object' });
  // An answer that does not validate is an error, not prose.
  const err = await expectError(() => client.chat.completions.create({
    model, messages: user('NOT JSON'),
    response_format: { type: 'json_schema', json_schema: { name: 'trip', schema } },
  }), OpenAI.InternalServerError);
  assert.equal(err.status, 502);
  assert.equal(err.code, 'response_format_mismatch');
  // A schema that cannot be resolved is refused before anything runs.
  const bad = await expectError(() => client.chat.completions.create({
    model, messages: user('bad schema'),
    response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'object', properties: { a: { $ref: '#/missing' } } } } },
  }), OpenAI.BadRequestError);
  assert.equal(bad.param, 'response_format.json_schema.schema');
});

test('image input: an image_url part reaches the model', async () => {
  const res = await client.chat.completions.create({
    model,
    messages: [{ role: 'user', content: [
      { type: 'text', text: 'what is in this image?' },
      { type: 'image_url', image_url: { url: process.env.SB_IMAGE, detail: 'low' } },
    ] }],
  });
  // The image is stored as an attachment of the message: the input names it.
  assert.match(res.choices[0].message.content, /^echo: what is in this image\?\n\[image image-1\.png, image\/png, /);
  const err = await expectError(() => client.chat.completions.create({
    model,
    messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'https://example.org/cat.png' } }] }],
  }), OpenAI.BadRequestError);
  assert.equal(err.param, 'messages[0].content[0].image_url.url');
});

test('abort: a client that aborts its stream stops the run', async () => {
  const controller = new AbortController();
  const stream = await client.chat.completions.create(
    { model, stream: true, messages: user('SLOW STORY') }, { signal: controller.signal });
  let text = '';
  try {
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta?.content ?? '';
      if (text.split('word').length > 4) controller.abort();
    }
  } catch (err) {
    // Depending on the SDK version an aborted iteration ends or throws.
    assert.ok(err instanceof OpenAI.APIUserAbortError || err.name === 'AbortError', `unexpected error: ${err}`);
  }
  assert.ok(text.includes('word word word'), 'some words arrived before the abort');
  assert.ok(!text.includes('THE-END'), 'the stream was aborted before its end');
  // The Go test checks that the run was cancelled.
});
