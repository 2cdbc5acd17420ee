// Drives a delegating agent with the published Genkit JS client (npm `genkit`, `genkit/beta/client`).
//
//   node js_delegation.cjs <agent url>
//
// The agent delegates to a sub-agent whose tool pauses for approval. The client streams the first
// turn, sees the sub-agent's interrupt surfaced as the agent's own, restarts it with
// metadata.resumed (the stock `restart()` adds none), and prints one line of JSON: what it saw.
// tests/integration/test_delegation_http.py makes the assertions.
'use strict';

const path = require('node:path');
const { createRequire } = require('node:module');

const interopDir = process.env.INTERLOCK_INTEROP_DIR || path.join(__dirname, '..', '..', '..', '.interop');
const clientRequire = createRequire(path.join(interopDir, 'js', 'package.json'));
const { remoteAgent } = clientRequire('genkit/beta/client');

// The client's interrupt objects carry name, ref and input; the metadata is on the message's parts.
function interruptInfo(p) {
  return { name: p.toolRequest.name, ref: p.toolRequest.ref ?? null, input: p.toolRequest.input, metadata: p.metadata };
}

async function main() {
  const [url] = process.argv.slice(2);
  const agent = remoteAgent({ url });
  const chat = agent.chat();
  const turn = chat.sendStream('pay bob');
  const streamed = [];
  for await (const c of turn.stream) {
    streamed.push(...c.toolRequests.filter((p) => p.metadata && p.metadata.interrupt).map((p) => p.toolRequest.name));
  }
  const paused = await turn.response;
  const request = paused.interrupts[0].restart();
  const approved = { ...request, metadata: { ...(request.metadata || {}), resumed: { approved: true } } };
  const done = await chat.resume({ restart: [approved] });
  console.log(
    JSON.stringify({
      paused: { finishReason: paused.finishReason, snapshotId: paused.snapshotId ?? null },
      interrupts: paused.toolRequests.filter((p) => p.metadata && p.metadata.interrupt).map(interruptInfo),
      claimed: paused.interrupts.map((i) => i.name),
      streamed,
      done: { finishReason: done.finishReason, text: done.text, snapshotId: done.snapshotId ?? null },
    }),
  );
}

main().catch((e) => {
  console.error(e && e.stack ? e.stack : String(e));
  process.exit(1);
});
