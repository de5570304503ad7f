// Runs the drain hook as n8n would (tests/unit/test_drain_hook.py): a fake express app records the route,
// n8n's own SIGTERM handler is registered first (as base-command.js does), a stand-in readiness endpoint
// answers 200. Prints one JSON line per event.
'use strict';
const http = require('http');
const events = [];
const say = (e) => { events.push(e); console.log(JSON.stringify(e)); };
let n8nStops = 0;
process.once('SIGTERM', () => { n8nStops += 1; say({ event: 'n8n-sigterm', drainAnswer: last }); finish(); });
let last = null;
const routes = {};
const app = { get: (path, fn) => { routes[path] = fn; } };
function probe(label, then) {
  const res = { status(code) { return { send() { last = code; say({ event: 'probe', label, code }); then(); } }; } };
  routes['/healthz/drain']({}, res);
}
function finish() { setTimeout(() => { say({ event: 'done', n8nStops }); process.exit(0); }, 300); }
const readiness = http.createServer((req, res) => { res.statusCode = req.url === '/healthz/readiness' ? 200 : 404; res.end(); });
readiness.listen(0, '127.0.0.1', async () => {
  process.env.N8N_PORT = String(readiness.address().port);
  const hook = require(process.argv[2]);
  for (const fn of hook.n8n.ready) await fn({ app }, {});
  probe('serving', () => {
    process.kill(process.pid, 'SIGTERM');
    setTimeout(() => probe('draining', () => process.kill(process.pid, 'SIGTERM')), 50);
  });
});
