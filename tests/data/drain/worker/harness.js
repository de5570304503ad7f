// Runs the drain hook's worker part as n8n would (tests/unit/test_drain_hook.py): n8n's own SIGTERM handler
// registered first (as base-command.js does), a stand-in ScalingService in a stand-in DI container, found
// through require.cache as in n8n (./dist/scaling/scaling.service.js, ./node_modules/@n8n/di). Its Bull queue
// holds one job, handed to n8n just before the SIGTERM: n8n counts it as running from COUNT_AT_MS on (-1:
// never), it ends at JOB_MS. Prints one JSON line per event.
'use strict';
const path = require('path');
const say = (e) => console.log(JSON.stringify(e));
const { ScalingService } = require(path.join(__dirname, 'dist', 'scaling', 'scaling.service.js'));
const { Container } = require(path.join(__dirname, 'node_modules', '@n8n', 'di'));
const scaling = Container.get(ScalingService);
let n8nStops = 0;
process.once('SIGTERM', () => {
  n8nStops += 1;
  say({ event: 'n8n-sigterm', paused: queue.paused, running: scaling.running });
  // n8n's own drain would wait for a counted job: so does the harness before it ends (a short one only)
  const end = () => setTimeout(() => { say({ event: 'done', n8nStops }); process.exit(0); }, 50);
  if (Number(process.env.JOB_MS) < 2000) job.then(end);
  else end();
});
const countAt = Number(process.env.COUNT_AT_MS);
const job = new Promise((resolve) => setTimeout(() => {
  scaling.running = 0;
  say({ event: 'job-done' });
  setTimeout(resolve, 5);  // Bull moves it to completed after n8n has let it go
}, Number(process.env.JOB_MS)));
if (countAt >= 0) setTimeout(() => { scaling.running = 1; say({ event: 'counted' }); }, countAt);
const queue = {
  paused: null,
  processing: [Promise.resolve(), job],  // an idle slot and the job's
  pause(isLocal, doNotWaitActive) {
    this.paused = { isLocal, doNotWaitActive };
    return process.env.PAUSE_HANGS ? new Promise(() => {}) : Promise.resolve();  // hangs as with Redis away
  },
};
scaling.queueByName.set('jobs', queue);
const hook = require(process.argv[2]);
(async () => {
  for (const fn of hook.worker.ready) await fn();
  say({ event: 'sigterm' });
  process.kill(process.pid, 'SIGTERM');
  setTimeout(() => process.kill(process.pid, 'SIGTERM'), 20);  // a second one during the drain: not passed on
})();
