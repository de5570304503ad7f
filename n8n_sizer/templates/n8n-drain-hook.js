// Draining for an `n8n webhook` processor behind a load balancer (n8n-sizer, issue 28). Loaded by n8n
// itself through EXTERNAL_HOOK_FILES; rendered identically for every cluster host and for the lab.
// - GET /healthz/drain answers like /healthz/readiness while the process serves, 503 once it drains
//   (404 before n8n is ready: the route exists from n8n's `n8n.ready` hook on). The load balancer's
//   health check polls it, so a processor leaves rotation before it stops taking requests.
// - SIGTERM (SIGINT) first flips that check, then, SIZER_DRAIN_S seconds later (two health
//   intervals plus in-flight time), hands the signal to n8n's own graceful shutdown.
// For an `n8n worker` (its `worker.ready` hook): SIGTERM first pauses the worker's Bull queues locally and
// waits until n8n counts every job Bull has handed it (or it is done). n8n 2.41.1 counts a job only once it
// has read the execution from Postgres, and its own shutdown stops the task runner as soon as that count is
// 0: the Code node of a job handed over in the instant of the stop then fails. Once counted, n8n's own drain
// waits for them. At most 10 s (0.8 x N8N_GRACEFUL_SHUTDOWN_TIMEOUT if shorter), then n8n's handler.
'use strict';
const http = require('http');

const drainMs = 1000 * Number(process.env.SIZER_DRAIN_S || '6');
const MAX_WORKER_WAIT_MS = 10000;
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

// n8n's ScalingService, the very instance n8n runs (its DI container, found through the modules it loaded).
function scalingService() {
  const path = require('path');
  const file = Object.keys(require.cache).find((k) => k.endsWith(path.join('dist', 'scaling', 'scaling.service.js')));
  if (!file) throw new Error("n8n's scaling service is not loaded");
  const { Container } = require(require.resolve('@n8n/di', { paths: [path.dirname(file)] }));
  return Container.get(require(file).ScalingService);
}

// Bull's slots still busy (fetching or running a job): each slot's promise settles when its job is done, and
// Bull gives a slot a new promise only once its local pause ends (a changed one is a job that passed the pause
// in the same instant: it counts as busy until it settles too).
function busySlots(queues, seen) {
  let busy = 0;
  for (const queue of queues) {
    for (const slot of Object.values(queue.processing)) {
      if (!seen.has(slot)) {
        const state = { done: false };
        seen.set(slot, state);
        slot.then(() => { state.done = true; }, () => { state.done = true; });
      }
      if (!seen.get(slot).done) busy += 1;
    }
  }
  return busy;
}

// Until n8n counts every job Bull still holds (its own drain then waits for them, with its own budget), or
// they are done: a job Bull handed over in the instant of the stop is not counted until n8n has read it.
function drainWorker(signal, handOver) {
  const started = Date.now();
  // the hand-over takes milliseconds (a second on a starved host); n8n's own stop must still fit in the stop grace
  // (N8N_GRACEFUL_SHUTDOWN_TIMEOUT + 15 s) also when the pause hangs
  const budgetMs = Math.min(800 * Number(process.env.N8N_GRACEFUL_SHUTDOWN_TIMEOUT || '30'), MAX_WORKER_WAIT_MS);
  let scaling = null;
  try {
    scaling = scalingService();
  } catch (error) {
    console.log('n8n-sizer drain: ' + signal + ' received; no Bull queue found (' + error.message + ')');
  }
  const queues = scaling ? [...scaling.queueByName.values()] : [];
  console.log('n8n-sizer drain: ' + signal + ' received; the worker takes no new job; n8n shuts down once it ' +
    'counts every job Bull handed it (at most ' + budgetMs / 1000 + ' s)');
  const seen = new Map();
  let finished = false;
  const finish = (how) => {
    if (finished) return;
    finished = true;
    clearTimeout(budget);
    console.log('n8n-sizer drain: worker jobs ' + how + ' after ' + (Date.now() - started) / 1000 +
      ' s; n8n shuts down');
    handOver();
  };
  // the budget also covers a pause that hangs (Redis away): n8n's own handler then runs with its own timeouts
  const budget = setTimeout(() => finish('over budget'), budgetMs);
  // pause(true, true) as n8n's own stop does: local to this worker, no new job, the blocking fetch aborted
  Promise.all(queues.map(async (queue) => await queue.pause(true, true)))
    .then(() => {
      const poll = () => {
        if (finished) return;
        const busy = busySlots(queues, seen);
        const counted = scaling.getRunningJobsCount();
        if (busy <= counted) finish('settled (' + counted + ' running, counted by n8n)');
        else setTimeout(poll, 20);
      };
      if (scaling) poll();
      else finish('unknown');
    })
    .catch((error) => finish('error: ' + error.message));
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
