// The web example's chat page: `useChat` from @ai-sdk/react against the example's
// `/api/chat`, with a fault picker. Bundled into ../dist/app.js by ../build.mjs.
//
// The page asks for the chat's delivered messages when it loads and when it regains focus
// (a holding line's promise is kept by the server's worker later), and polls them while the
// last answer says a follow-up is owed (`metadata.followUp`).
import { useCallback, useEffect, useRef, useState } from 'react';
import { createRoot } from 'react-dom/client';
import { useChat } from '@ai-sdk/react';
import { DefaultChatTransport } from 'ai';
import Markdown from 'react-markdown';

// What the scripted provider does to the next message (the labels avoid the words of a real
// failure, so a test can look for those anywhere on the page).
const FAULTS = [
  ['healthy', 'Healthy'],
  ['burst', 'A burst of server errors (retried)'],
  ['stall', 'A stall mid-answer (fallback route)'],
  ['outage', 'Down for a few seconds (promise kept)'],
  ['leak', 'Failure text in the answer (gate)'],
];

const POLL_MS = 1000;

/**
 * The chat's id lives in the URL's fragment, so a reload keeps the chat. `fresh`: made up
 * now, so the server has nothing for it yet.
 */
function chatId() {
  const fromHash = window.location.hash.slice(1);
  if (/^[A-Za-z0-9_-]{8,64}$/.test(fromHash)) {
    return { id: fromHash, fresh: false };
  }
  const bytes = new Uint8Array(12);
  crypto.getRandomValues(bytes);
  const id = Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
  window.history.replaceState(null, '', `#${id}`);
  return { id, fresh: true };
}

function text(message) {
  return message.parts
    .filter((part) => part.type === 'text')
    .map((part) => part.text)
    .join('\n\n');
}

function Message({ message }) {
  return (
    <li className={`message ${message.role}`} data-role={message.role} data-id={message.id}>
      <span className="who">{message.role === 'user' ? 'You' : 'Agent'}</span>
      <div className="body">
        {message.role === 'user' ? <p>{text(message)}</p> : <Markdown>{text(message)}</Markdown>}
      </div>
    </li>
  );
}

function App() {
  const [{ id, fresh }] = useState(chatId);
  // Whether the server may know the chat (a fresh one is created by its first message).
  const known = useRef(!fresh);
  const [transport] = useState(() => new DefaultChatTransport({ api: '/api/chat' }));
  const [fault, setFault] = useState('healthy');
  const [input, setInput] = useState('');
  const { messages, sendMessage, setMessages, status, error, resumeStream, clearError } = useChat({
    id,
    transport,
  });
  const ready = useRef(status);
  ready.current = status;

  // The server's record of the chat; `false` when it has none yet (a new chat).
  const refresh = useCallback(async () => {
    if (!known.current) {
      return false;
    }
    const response = await fetch(`/api/chat/${encodeURIComponent(id)}/messages`, {
      credentials: 'same-origin',
    });
    if (response.status !== 200) {
      return false;
    }
    const listed = await response.json();
    if (ready.current === 'ready' || ready.current === 'error') {
      setMessages(listed);
    }
    return true;
  }, [id, setMessages]);

  useEffect(() => {
    refresh().then((found) => {
      if (found) {
        resumeStream();
      }
    });
    const onFocus = () => {
      if (document.visibilityState === 'visible') {
        refresh();
      }
    };
    window.addEventListener('focus', onFocus);
    document.addEventListener('visibilitychange', onFocus);
    return () => {
      window.removeEventListener('focus', onFocus);
      document.removeEventListener('visibilitychange', onFocus);
    };
  }, []);

  const last = messages[messages.length - 1];
  const owed = last?.role === 'assistant' && last?.metadata?.followUp === true;
  useEffect(() => {
    if (!owed || status !== 'ready') {
      return undefined;
    }
    const timer = setInterval(refresh, POLL_MS);
    return () => clearInterval(timer);
  }, [owed, status, refresh]);

  const busy = status === 'submitted' || status === 'streaming';
  const submit = (event) => {
    event.preventDefault();
    const message = input.trim();
    if (!message || busy) {
      return;
    }
    clearError();
    known.current = true;
    sendMessage({ text: message }, { body: { fault } });
    setInput('');
  };

  return (
    <main>
      <header>
        <h1>mesh-egress web chat</h1>
        <label>
          Provider{' '}
          <select id="fault" value={fault} onChange={(e) => setFault(e.target.value)}>
            {FAULTS.map(([value, label]) => (
              <option key={value} value={value}>
                {label}
              </option>
            ))}
          </select>
        </label>
      </header>
      <ol id="messages">
        {messages.map((message) => (
          <Message key={message.id} message={message} />
        ))}
      </ol>
      {owed ? <p id="owed">A follow-up is on its way.</p> : null}
      {error ? (
        <p id="error" role="alert">
          {error.message}
        </p>
      ) : null}
      <form onSubmit={submit}>
        <input
          id="prompt"
          value={input}
          placeholder="Ask the release assistant…"
          onChange={(e) => setInput(e.target.value)}
          autoComplete="off"
        />
        <button id="send" type="submit" disabled={busy}>
          Send
        </button>
      </form>
      <p id="status" data-status={status}>
        {busy ? 'Writing…' : ''}
      </p>
    </main>
  );
}

createRoot(document.getElementById('root')).render(<App />);
