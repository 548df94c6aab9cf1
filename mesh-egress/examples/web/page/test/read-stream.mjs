// A client nobody here wrote: the pinned `ai` package reads the web example's stream.
//
//   node test/read-stream.mjs http://127.0.0.1:PORT
//
// For each fault it posts one message through `DefaultChatTransport.sendMessages` (the
// transport `useChat` uses: its request, its SSE parser, its chunk schema), reads the chunks
// with `readUIMessageStream`, and records the message it builds, the chunk types in order and
// every client error. For the outage it then waits for the promise: `reconnectToStream` (the
// SDK's resume) until the follow-up is there, then the chat's listed messages. Prints one JSON
// object; the Rust test (mesh-egress/tests/web_node.rs) asserts on it.
import { DefaultChatTransport, readUIMessageStream } from 'ai';

const base = process.argv[2];
if (!base) {
  console.error('usage: node test/read-stream.mjs BASE_URL');
  process.exit(2);
}
const FOLLOW_UP_BOUND_MS = 15_000;

/** A fetch that keeps the server's cookie, as a browser would. */
function cookieFetch() {
  let cookie = null;
  return async (url, init = {}) => {
    const headers = new Headers(init.headers ?? {});
    if (cookie) {
      headers.set('cookie', cookie);
    }
    const response = await fetch(url, { ...init, headers });
    const set = response.headers.get('set-cookie');
    if (set) {
      cookie = set.split(';')[0];
    }
    return response;
  };
}

/** Reads a chunk stream to its end: the last message, the chunk types, the errors. */
async function read(stream) {
  const types = [];
  const errors = [];
  const recorded = stream.pipeThrough(
    new TransformStream({
      transform(chunk, controller) {
        types.push(chunk.type);
        controller.enqueue(chunk);
      },
    }),
  );
  let message = null;
  try {
    for await (const update of readUIMessageStream({
      stream: recorded,
      onError: (error) => errors.push(String(error?.message ?? error)),
      terminateOnError: true,
    })) {
      message = update;
    }
  } catch (error) {
    errors.push(String(error?.message ?? error));
  }
  return {
    id: message?.id ?? null,
    texts: (message?.parts ?? []).filter((p) => p.type === 'text').map((p) => p.text),
    metadata: message?.metadata ?? null,
    types,
    errors,
  };
}

async function post(fault) {
  const fetch = cookieFetch();
  const transport = new DefaultChatTransport({ api: `${base}/api/chat`, fetch });
  const chatId = `node${fault}${Date.now().toString(36)}`;
  const stream = await transport.sendMessages({
    chatId,
    trigger: 'submit-message',
    messageId: undefined,
    abortSignal: undefined,
    body: { fault },
    messages: [
      { id: `u-${fault}`, role: 'user', parts: [{ type: 'text', text: 'Is the release green?' }] },
    ],
  });
  return { fault, chatId, transport, fetch, reply: await read(stream) };
}

/** The SDK's resume until it has a reply (the worker keeping the promise), bounded. */
async function awaitFollowUp(transport, chatId) {
  const deadline = Date.now() + FOLLOW_UP_BOUND_MS;
  let polls = 0;
  while (Date.now() < deadline) {
    polls += 1;
    const stream = await transport.reconnectToStream({ chatId });
    if (stream) {
      return { polls, reply: await read(stream) };
    }
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  return { polls, reply: null };
}

const results = {};
for (const fault of ['healthy', 'burst', 'stall', 'outage', 'leak']) {
  const { chatId, transport, fetch, reply } = await post(fault);
  const result = { chatId, reply };
  if (fault === 'outage' || fault === 'leak') {
    result.followUp = await awaitFollowUp(transport, chatId);
    const listed = await fetch(`${base}/api/chat/${chatId}/messages`);
    result.listed = { status: listed.status, messages: await listed.json() };
    const again = await transport.reconnectToStream({ chatId });
    result.resumeAfterListing = again === null ? 'none' : 'stream';
  }
  results[fault] = result;
}
console.log(JSON.stringify(results));
