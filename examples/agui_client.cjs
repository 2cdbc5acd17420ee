// Drive interlock's AG-UI route with the AG-UI client (npm install @ag-ui/client@1.0.0).
//
//   interlock serve agui_app:agent --ag-ui --port 8000      (in examples/)
//   node agui_client.cjs http://127.0.0.1:8000
//
// A run pauses with an interrupt outcome; the next run resolves it, and the turn goes on.
'use strict';

const { HttpAgent } = require('@ag-ui/client');

async function main() {
  const base = process.argv[2] || 'http://127.0.0.1:8000';
  const agent = new HttpAgent({ url: `${base}/ag-ui/banker` });
  agent.addMessage({ id: 'm1', role: 'user', content: 'pay Bob 25' });
  await agent.runAgent();
  const [asked] = agent.pendingInterrupts;
  console.log(`paused: ${asked.id} ${asked.metadata.interrupt.question} answer schema: ${Object.keys(asked.responseSchema.properties)}`);

  const { newMessages } = await agent.runAgent({
    resume: [{ interruptId: asked.id, status: 'resolved', payload: { approved: true } }],
  });
  const tool = newMessages.find((m) => m.role === 'tool');
  const reply = newMessages.filter((m) => m.role === 'assistant' && m.content).pop();
  console.log(`tool: ${tool.content}`);
  console.log(`reply: ${reply.content}`);
  console.log(`pending: ${agent.pendingInterrupts.length}`);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
