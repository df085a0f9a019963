// Helper process of bench/agent-relay.ts: opens N idle agent sessions with the agent's own
// connection code (retrying any that fail to connect, as the agent does), reports when all
// are established, then holds them until killed.
import { connectOnce } from '../agent/session.js';
import { Updater } from '../agent/updater.js';

const [url, token, countText] = process.argv.slice(2);
const count = Number(countText);
let established = 0;
const quiet = () => {};
const log = (msg: string) => {
  if (msg.includes('established') && ++established === count) process.stdout.write('ready\n');
};
const cfg = { apiUrl: url, authtoken: token, metadata: '', updateCheck: false, stateDir: '/tmp', tunnels: [{ name: 't', proto: 'tcp' as const, forwards_to: 'localhost:1', metadata: '' }] };
async function one() {
  for (;;) {
    const o = await connectOnce(cfg, '0.0.0', new Updater('0.0.0', false, '/tmp', quiet), log);
    if (o.kind === 'lost' && o.established) established--;
    await new Promise((r) => setTimeout(r, 200 + Math.random() * 300));
  }
}
const progress = setInterval(() => process.stderr.write(`  ${established}/${count} sessions\r`), 2000);
progress.unref();
for (let i = 0; i < count; i++) {
  void one();
  if (i % 20 === 19) await new Promise((r) => setTimeout(r, 50));
}
