// Draining for an `n8n webhook` processor behind a load balancer (n8n-sizer, issue 28). Loaded by n8n
// itself through EXTERNAL_HOOK_FILES; rendered identically for every cluster host and for the lab.
// - GET /healthz/drain answers like /healthz/readiness while the process serves, 503 once it drains
//   (404 before n8n is ready: the route exists from n8n's `n8n.ready` hook on). The load balancer's
//   health check polls it, so a processor leaves rotation before it stops taking requests.
// - SIGTERM (SIGINT) first flips that check, then, SIZER_DRAIN_S seconds later (two health
//   intervals plus in-flight time), hands the signal to n8n's own graceful shutdown.
'use strict';
const http = require('http');

const drainMs = 1000 * Number(process.env.SIZER_DRAIN_S || '6');
const port = Number(process.env.N8N_PORT || '5678');
let draining = false;

function readiness(res) {
  const req = http.get({ host: '127.0.0.1', port, path: '/healthz/readiness', timeout: 4000 }, (answer) => {
    answer.resume();
    res.status(answer.statusCode === 200 ? 200 : 503).send({ status: answer.statusCode === 200 ? 'ok' : 'error' });
  });
  req.on('timeout', () => req.destroy(new Error('timeout')));
  req.on('error', () => res.status(503).send({ status: 'error' }));
}

function delaySignal(signal) {
  const n8nHandlers = process.listeners(signal);
  process.removeAllListeners(signal);
  process.on(signal, () => {
    if (draining) return;
    draining = true;
    // no template literal: Compose would read its dollar-brace as a variable of the rendered file
    console.log('n8n-sizer drain: ' + signal + ' received; /healthz/drain answers 503, n8n shuts down in ' +
      drainMs / 1000 + ' s');
    setTimeout(() => n8nHandlers.forEach((handler) => handler(signal)), drainMs);
  });
}

module.exports = {
  n8n: {
    ready: [
      async function (server) {
        server.app.get('/healthz/drain', (_req, res) => {
          if (draining) res.status(503).send({ status: 'draining' });
          else readiness(res);
        });
        delaySignal('SIGTERM');
        delaySignal('SIGINT');
      },
    ],
  },
};
