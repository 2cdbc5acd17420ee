// Drives interlock's AG-UI route with the published AG-UI client (npm `@ag-ui/client`, its `HttpAgent`).
//
//   node agui_client.cjs <server url> <plan json>
//
// The plan is a list of runs: {"client": name, "agent": agentName, "threadId": id, "message"?: text,
// "resume"?: [ResumeEntry]}, or of lists of runs that are started together (racing). Each client name is one HttpAgent (kept across the runs that name it, with the
// history and pending interrupts the client keeps); a new name is a client that knows nothing of the thread.
// Prints one line of JSON: for each run, every event the client received (raw, as parsed from the stream), the
// error runAgent threw (if any), and the client's pending interrupts afterwards. tests/integration/test_agui_client.py
// validates each event with ag_ui.core's models and makes the assertions.
//
// The client is loaded from $INTERLOCK_INTEROP_DIR/js/node_modules (default: <repo>/.interop/js),
// where scripts/setup_interop.sh installs it from tests/kit/interop/package-lock.json.
'use strict';

const path = require('node:path');
const { createRequire } = require('node:module');

const interopDir = process.env.INTERLOCK_INTEROP_DIR || path.join(__dirname, '..', '..', '..', '.interop');
const clientRequire = createRequire(path.join(interopDir, 'js', 'package.json'));
const { HttpAgent } = clientRequire('@ag-ui/client');

async function main() {
  const [url, planText] = process.argv.slice(2);
  if (!url || !planText) {
    console.error('usage: node agui_client.cjs <server url> <plan json>');
    process.exit(2);
  }
  const clients = new Map();
  const runs = [];
  for (const item of JSON.parse(planText)) {
    if (Array.isArray(item)) {
      runs.push(await Promise.all(item.map((step) => runOne(clients, url, step, runs.length))));
    } else {
      runs.push(await runOne(clients, url, item, runs.length));
    }
  }
  process.stdout.write(JSON.stringify(runs) + '\n');
}

async function runOne(clients, url, step, index) {
  let agent = clients.get(step.client);
  if (!agent) {
    agent = new HttpAgent({
      url: `${url}/ag-ui/${step.agent}`,
      threadId: step.threadId,
      headers: { 'X-User': step.user || 'ann' },
    });
    clients.set(step.client, agent);
  }
  if (step.message) {
    agent.addMessage({ id: `m${index}`, role: 'user', content: step.message });
  }
  const events = [];
  let error = null;
  try {
    await agent.runAgent(step.resume ? { resume: step.resume } : {}, {
      onEvent: ({ event }) => {
        events.push(event);
      },
    });
  } catch (e) {
    error = String((e && e.message) || e);
  }
  return { events, error, pendingInterrupts: agent.pendingInterrupts, state: agent.state };
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
