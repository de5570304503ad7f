// Runs the drain hook's worker part as n8n would (tests/unit/test_drain_hook.py): n8n's own SIGTERM handler
// registered first (as base-command.js does), a stand-in ScalingService in a stand-in DI container, found
// through require.cache as in n8n (./dist/scaling/scaling.service.js, ./node_modules/@n8n/di). Its Bull queue
// holds one job handed to n8n but not yet counted by it, lasting JOB_MS. Prints one JSON line per event.
'use strict';
const path = require('path');
const say = (e) => console.log(JSON.stringify(e));
const { ScalingService } = require(path.join(__dirname, 'dist', 'scaling', 'scaling.service.js'));
const { Container } = require(path.join(__dirname, 'node_modules', '@n8n', 'di'));
let n8nStops = 0;
process.once('SIGTERM', () => {
  n8nStops += 1;
  say({ event: 'n8n-sigterm', paused: queue.pausedLocally });
  setTimeout(() => { say({ event: 'done', n8nStops }); process.exit(0); }, 300);
});
const queue = {
  pausedLocally: false,
  processing: [new Promise((resolve) => setTimeout(() => { say({ event: 'job-done' }); resolve(); }, Number(process.env.JOB_MS)))],
  async pause(isLocal) { this.pausedLocally = isLocal === true; },
};
Container.get(ScalingService).queueByName.set('jobs', queue);
const hook = require(process.argv[2]);
(async () => {
  for (const fn of hook.worker.ready) await fn();
  say({ event: 'sigterm' });
  process.kill(process.pid, 'SIGTERM');
  setTimeout(() => process.kill(process.pid, 'SIGTERM'), 20);  // a second one during the drain: not passed on
})();
