// Drives one interop scenario with the published Genkit JS client (npm `genkit`, `genkit/beta/client`).
//
//   node js_client.cjs <agent url> <scenario>
//
// Prints one line of JSON: what the client saw (results, chunks, errors, its own message history).
// tests/integration/test_interop.py makes the assertions. Exit code 0 when the scenario ran to its end, 1 when
// the client threw something the scenario did not expect, 2 on bad usage.
//
// The client is loaded from $INTERLOCK_INTEROP_DIR/js/node_modules (default: <repo>/.interop/js),
// where scripts/setup_interop.sh installs it from tests/kit/interop/package-lock.json.
'use strict';

const path = require('node:path');
const { createRequire } = require('node:module');

const interopDir = process.env.INTERLOCK_INTEROP_DIR || path.join(__dirname, '..', '..', '..', '.interop');
const clientRequire = createRequire(path.join(interopDir, 'js', 'package.json'));
const { remoteAgent } = clientRequire('genkit/beta/client');

// Multi-byte UTF-8 (2, 3 and 4 bytes): the client garbles a character split across reads unless
// the server escapes it (interop.md §7).
const NON_ASCII = 'caf\u00e9 \u2615 \u65e5\u672c \u{1F600}';

function turnInfo(res) {
  return {
    text: res.text,
    finishReason: res.finishReason,
    snapshotId: res.snapshotId ?? null,
    sessionId: res.sessionId ?? null,
    interrupts: res.interrupts.map((i) => ({ name: i.name, ref: i.ref ?? null, input: i.input })),
    message: res.message ?? null,
    state: res.raw.state ?? null,
  };
}

function errorInfo(e) {
  return { name: e && e.name, status: (e && e.status) ?? null, message: String(e && e.message) };
}

// Runs fn; {ok: value} or {error: {...}} for what it threw (the scenario expected it might).
async function capture(fn) {
  try {
    const value = await fn();
    return { ok: value === undefined ? null : value };
  } catch (e) {
    return { error: errorInfo(e) };
  }
}

// The paused tool requests a turn streamed (the client's own chunk API: toolRequests with metadata.interrupt).
function streamedInterrupts(chunks) {
  return chunks.flatMap((c) => c.toolRequests.filter((p) => p.metadata && p.metadata.interrupt));
}

async function drainChunks(turn) {
  const chunks = [];
  for await (const c of turn.stream) chunks.push(c);
  return { chunks, response: await turn.response };
}

async function drain(turn) {
  const chunks = [];
  for await (const c of turn.stream) chunks.push(c.raw);
  return { chunks, response: await turn.response };
}

const scenarios = {
  // A streamed first turn, then a streamed second one with non-ASCII text.
  async stream(agent) {
    const chat = agent.chat();
    const { chunks, response } = await drain(chat.sendStream('hello'));
    const second = await drain(chat.sendStream(NON_ASCII));
    return {
      chunks,
      result: turnInfo(response),
      secondChunks: second.chunks,
      second: turnInfo(second.response),
      messages: chat.messages,
    };
  },

  // An interrupt, answered with respond (streamed, to see the tool chunk).
  async interrupt_respond(agent) {
    const chat = agent.chat();
    const paused = await drainChunks(chat.sendStream('transfer 100 to acct-1'));
    const first = paused.response;
    const answer = first.interrupts[0].respond({ approved: true, by: 'js' });
    const { chunks, response } = await drain(chat.resumeStream({ respond: [answer] }));
    return {
      interrupted: turnInfo(first),
      interruptedChunks: paused.chunks.map((c) => c.raw),
      streamedInterrupts: streamedInterrupts(paused.chunks),
      resumed: turnInfo(response),
      chunks,
      messages: chat.messages,
    };
  },

  // An interrupt, restarted: first plainly (no metadata, so the tool pauses again), then with
  // metadata.resumed. The stock JS `restart()` adds no metadata; callers add `resumed` themselves.
  async interrupt_restart(agent) {
    const chat = agent.chat();
    const first = await chat.send('deploy please');
    const plain = await chat.resume({ restart: [first.interrupts[0].restart()] });
    const request = plain.interrupts[0].restart();
    const resumed = { ...request, metadata: { ...(request.metadata || {}), resumed: { approvedBy: 'js' } } };
    const restarted = await chat.resume({ restart: [resumed] });
    return {
      interrupted: turnInfo(first),
      plain: turnInfo(plain),
      restarted: turnInfo(restarted),
      messages: chat.messages,
    };
  },

  // getSnapshot by snapshot id (string and object forms) and by session id.
  async snapshots(agent) {
    const chat = agent.chat();
    const one = await chat.send('one');
    const two = await chat.send('two');
    return {
      first: turnInfo(one),
      second: turnInfo(two),
      byId: await agent.getSnapshot(two.snapshotId),
      firstById: await agent.getSnapshot({ snapshotId: one.snapshotId }),
      bySession: await agent.getSnapshot({ sessionId: two.sessionId }),
    };
  },

  // loadChat (by snapshot id, then by session id), then send on the loaded chat.
  async load_chat(agent) {
    const first = await agent.chat().send('first');
    const loaded = await agent.loadChat({ snapshotId: first.snapshotId });
    const loadedSnapshotId = loaded.snapshotId ?? null;
    const loadedMessages = [...loaded.messages];
    const second = await loaded.send('second');
    const bySession = await agent.loadChat({ sessionId: first.sessionId });
    const bySessionSnapshotId = bySession.snapshotId ?? null;
    const bySessionMessages = [...bySession.messages];
    const third = await bySession.send('third');
    return {
      first: turnInfo(first),
      loadedMessages,
      loadedSnapshotId,
      second: turnInfo(second),
      messages: loaded.messages,
      bySessionSnapshotId,
      bySessionMessages,
      third: turnInfo(third),
    };
  },

  // Detach, poll once (the model waits for that poll), then wait for the result.
  async detach_wait(agent) {
    const chat = agent.chat();
    const task = await chat.detach('slow job');
    const first = await agent.getSnapshot(task.snapshotId);
    const done = await task.wait({ intervalMs: 100 });
    return { snapshotId: task.snapshotId, sessionId: chat.sessionId ?? null, first, done };
  },

  // Detach, then abort the running turn from the client.
  async detach_abort(agent) {
    const chat = agent.chat();
    const task = await chat.detach('job to abort');
    const before = await agent.getSnapshot(task.snapshotId);
    const previous = await task.abort();
    const after = await task.wait({ intervalMs: 100 });
    const again = await agent.abort(task.snapshotId);
    return {
      snapshotId: task.snapshotId,
      sessionId: chat.sessionId ?? null,
      before,
      previous: previous ?? null,
      after,
      again: again ?? null,
    };
  },

  // A client-managed agent (no store): the client infers the mode from the first result and
  // echoes `result.state` back as `init.state` on every turn.
  async client_managed(agent) {
    const chat = agent.chat();
    const { chunks, response: hello } = await drain(chat.sendStream('hi'));
    const paused = await drainChunks(chat.sendStream('please approve'));
    const interrupted = paused.response;
    const resumed = await chat.resume({ respond: [interrupted.interrupts[0].respond({ approved: false })] });
    const after = await chat.send('thanks');
    return {
      chunks,
      streamedInterrupts: streamedInterrupts(paused.chunks),
      results: [hello, interrupted, resumed, after].map(turnInfo),
      messages: chat.messages,
    };
  },

  // The same conversation with an agent that signs its state: the client echoes it back unchanged.
  async client_managed_signed(agent) {
    return scenarios.client_managed(agent);
  },

  // Errors: unknown snapshot (getSnapshot, send), state sent to a store agent, abort of an unknown
  // id, and a resume that fits no interrupt, after which the session must still be usable.
  async errors(agent) {
    const out = {};
    out.getUnknown = await capture(() => agent.getSnapshot('does-not-exist'));
    out.sendUnknown = await capture(() => agent.chat({ snapshotId: 'does-not-exist' }).send('hi'));
    out.stateToStoreAgent = await capture(() => agent.chat({ state: { messages: [] } }).send('hi'));
    out.abortUnknown = await capture(() => agent.abort('does-not-exist'));
    const chat = agent.chat();
    out.good = turnInfo(await chat.send('hi'));
    const stray = { toolResponse: { name: 'approveTransfer', ref: 'nope', output: { approved: true } } };
    out.badResume = await capture(() => chat.resume({ respond: [stray] }));
    out.after = turnInfo(await chat.send('again'));
    out.messages = chat.messages;
    return out;
  },
};

async function main() {
  const [url, name] = process.argv.slice(2);
  const scenario = scenarios[name];
  if (!url || !scenario) {
    console.error(`usage: node js_client.cjs <agent url> <${Object.keys(scenarios).join('|')}>`);
    process.exit(2);
  }
  let out;
  try {
    out = { ok: true, report: await scenario(remoteAgent({ url })) };
  } catch (e) {
    out = { ok: false, error: errorInfo(e), stack: String(e && e.stack) };
  }
  // Exit once the line is written: idle keep-alive sockets must not keep the process around.
  process.stdout.write(JSON.stringify(out) + '\n', () => process.exit(out.ok ? 0 : 1));
}

main();
