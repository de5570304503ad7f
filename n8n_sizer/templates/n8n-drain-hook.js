// Draining for an `n8n webhook` processor behind a load balancer (n8n-sizer, issue 28). Loaded by n8n
// itself through EXTERNAL_HOOK_FILES; rendered identically for every cluster host and for the lab.
// - GET /healthz/drain answers like /healthz/readiness while the process serves, 503 once it drains
//   (404 before n8n is ready: the route exists from n8n's `n8n.ready` hook on). The load balancer's
//   health check polls it, so a processor leaves rotation before it stops taking requests.
// - SIGTERM (SIGINT) first flips that check, then, SIZER_DRAIN_S seconds later (two health
//   intervals plus in-flight time), hands the signal to n8n's own graceful shutdown.
// For an `n8n worker` (its `worker.ready` hook): SIGTERM first pauses the worker's Bull queues locally and
// waits until every job Bull has already handed to n8n has finished, also one n8n has not yet counted as
// running (n8n 2.41.1 counts a job only once it has read the execution from Postgres; its own shutdown stops
// the task runner as soon as that count is 0, and the Code node of such a job then fails). Only then, or after
// 0.8 x N8N_GRACEFUL_SHUTDOWN_TIMEOUT (n8n's own drain budget), n8n's handler gets the signal.
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

// Take n8n's SIGTERM/SIGINT handler aside; the first signal runs `drain(signal, handOver)`, where handOver()
// gives it to n8n's own handler; a second signal during the drain is not passed on again.
function takeOver(signal, drain) {
  const n8nHandlers = process.listeners(signal);
  process.removeAllListeners(signal);
  process.on(signal, () => {
    if (draining) return;
    draining = true;
    drain(signal, () => n8nHandlers.forEach((handler) => handler(signal)));
  });
}

function delaySignal(signal, handOver) {
  // no template literal: Compose would read its dollar-brace as a variable of the rendered file
  console.log('n8n-sizer drain: ' + signal + ' received; /healthz/drain answers 503, n8n shuts down in ' +
    drainMs / 1000 + ' s');
  setTimeout(handOver, drainMs);
}

// The worker's Bull queues, from the very modules n8n loaded (its ScalingService in the DI container).
function bullQueues() {
  const path = require('path');
  const file = Object.keys(require.cache).find((k) => k.endsWith(path.join('dist', 'scaling', 'scaling.service.js')));
  if (!file) throw new Error("n8n's scaling service is not loaded");
  const { Container } = require(require.resolve('@n8n/di', { paths: [path.dirname(file)] }));
  return [...Container.get(require(file).ScalingService).queueByName.values()];
}

// Until no job Bull handed out runs: Bull reassigns a slot's promise only after its local pause ends, so a
// changed promise is a job that passed the pause check in the same instant; wait for that one too.
async function jobsSettled(queue) {
  for (;;) {
    const seen = Object.values(queue.processing);
    await Promise.allSettled(seen);
    const now = Object.values(queue.processing);
    if (now.length === seen.length && now.every((p, i) => p === seen[i])) return;
  }
}

function drainWorker(signal, handOver) {
  const started = Date.now();
  const budgetMs = 800 * Number(process.env.N8N_GRACEFUL_SHUTDOWN_TIMEOUT || '30');
  let queues = [];
  try {
    queues = bullQueues();
  } catch (error) {
    console.log('n8n-sizer drain: ' + signal + ' received; no Bull queue found (' + error.message + ')');
  }
  console.log('n8n-sizer drain: ' + signal + ' received; the worker takes no new job and finishes the ' +
    'jobs Bull handed it before n8n shuts down (at most ' + budgetMs / 1000 + ' s)');
  // pause(true): local to this worker; Bull stops fetching and aborts its blocking wait for a new job
  const settled = Promise.all(queues.map(async (queue) => { await queue.pause(true); await jobsSettled(queue); }));
  let timer;
  const budget = new Promise((resolve) => { timer = setTimeout(() => resolve('budget'), budgetMs); });
  Promise.race([settled.then(() => 'settled'), budget])
    .catch((error) => 'error: ' + error.message)
    .then((how) => {
      clearTimeout(timer);
      console.log('n8n-sizer drain: worker jobs ' + how + ' after ' + (Date.now() - started) / 1000 +
        ' s; n8n shuts down');
      handOver();
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
        takeOver('SIGTERM', delaySignal);
        takeOver('SIGINT', delaySignal);
      },
    ],
  },
  worker: {
    ready: [
      async function () {
        takeOver('SIGTERM', drainWorker);
        takeOver('SIGINT', drainWorker);
      },
    ],
  },
};
