'use strict';
// Stand-in for n8n's task-runner-launcher (Go; n8n-io/task-runner-launcher, docs/lifecycle.md), for the
// JavaScript runner only. Same cycle: wait for the broker's /healthz, exchange N8N_RUNNERS_AUTH_TOKEN for a
// grant token (POST /runners/auth), register on the broker's websocket as a runner with a non-expiring
// offer, and when the broker accepts it (a task is waiting) defer the task, disconnect and start the real
// runner (@n8n/task-runner) with a fresh grant token. The runner stops itself after
// N8N_RUNNERS_AUTO_SHUTDOWN_TIMEOUT idle seconds; then the cycle starts again. A refused auth token ends
// the launcher with an error, as the Go launcher does, so the container restarts under its policy.
// Launcher health: GET :5680/healthz answers 200 while the launcher runs (the compose healthcheck).
const http = require('node:http');
const crypto = require('node:crypto');
const { spawn } = require('node:child_process');
const WebSocket = require('ws');

const RUNNER_START = '/usr/local/lib/node_modules/@n8n/task-runner/dist/start.js';
// From the runners image's /etc/n8n-task-runners.json (javascript entry): what the runner may inherit,
// and what the launcher sets for it.
const ALLOWED_ENV = ['PATH', 'GENERIC_TIMEZONE', 'NODE_OPTIONS', 'NODE_PATH', 'N8N_RUNNERS_AUTO_SHUTDOWN_TIMEOUT',
  'N8N_RUNNERS_GRACEFUL_SHUTDOWN_TIMEOUT', 'N8N_RUNNERS_TASK_TIMEOUT', 'N8N_RUNNERS_MAX_CONCURRENCY',
  'N8N_SENTRY_DSN', 'N8N_VERSION', 'ENVIRONMENT', 'DEPLOYMENT_NAME', 'HOME'];
const ENV_OVERRIDES = {
  NODE_FUNCTION_ALLOW_BUILTIN: 'crypto',
  NODE_FUNCTION_ALLOW_EXTERNAL: 'moment',
  N8N_RUNNERS_HEALTH_CHECK_SERVER_HOST: '0.0.0.0',
};
const RUNNER_HEALTH_PORT = '5681';

const env = process.env;
const brokerUri = (env.N8N_RUNNERS_TASK_BROKER_URI || 'http://127.0.0.1:5679').replace(/\/+$/, '');
const authToken = env.N8N_RUNNERS_AUTH_TOKEN || '';
const healthPort = Number(env.N8N_RUNNERS_LAUNCHER_HEALTH_CHECK_PORT || 5680);
const runnerTypes = process.argv.slice(2);
let child = null;
let stopping = false;

function log(message) {
  process.stdout.write(`${new Date().toISOString()} [launcher:js] ${message}\n`);
}

function fail(message) {
  log(`ERROR ${message}`);
  process.exit(1);
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function waitBrokerReady() {
  for (;;) {
    try {
      const response = await fetch(`${brokerUri}/healthz`, { signal: AbortSignal.timeout(5000) });
      if (response.ok) return;
    } catch {
      // not up yet: the broker starts with n8n, after its migrations
    }
    await sleep(1000);
  }
}

async function fetchGrantToken() {
  let lastError = '';
  // The Go launcher retries a few times (LimitedRetry), then gives up.
  for (let attempt = 0; attempt < 5; attempt++) {
    try {
      const response = await fetch(`${brokerUri}/runners/auth`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ token: authToken }),
        signal: AbortSignal.timeout(10000),
      });
      if (response.ok) return (await response.json()).data.token;
      lastError = `request to fetch grant token received status code ${response.status}`;
    } catch (error) {
      lastError = String(error);
    }
    await sleep(1000);
  }
  throw new Error(`exhausted retries to fetch grant token: ${lastError}`);
}

class BrokerDown extends Error {}

function handshake(grantToken, taskType) {
  return new Promise((resolve, reject) => {
    const url = `${brokerUri.replace(/^http/, 'ws')}/runners/_ws?id=${crypto.randomBytes(8).toString('hex')}`;
    const ws = new WebSocket(url, { headers: { authorization: `Bearer ${grantToken}` } });
    let accepted = false;
    ws.on('message', (data) => {
      const message = JSON.parse(String(data));
      if (message.type === 'broker:inforequest') {
        ws.send(JSON.stringify({ type: 'runner:info', types: [taskType], name: `launcher-${taskType}` }));
      } else if (message.type === 'broker:runnerregistered') {
        ws.send(JSON.stringify({ type: 'runner:taskoffer', taskType,
          offerId: crypto.randomBytes(8).toString('hex'), validFor: -1 }));
        log("Waiting for launcher's task offer to be accepted...");
      } else if (message.type === 'broker:taskofferaccept') {
        accepted = true;
        ws.send(JSON.stringify({ type: 'runner:taskdeferred', taskId: message.taskId }), () => {
          ws.close();
          resolve();
        });
      }
    });
    ws.on('close', () => { if (!accepted) reject(new BrokerDown('task broker closed the connection')); });
    ws.on('error', (error) => { if (!accepted) reject(new BrokerDown(String(error))); });
  });
}

function runRunner(grantToken) {
  const runnerEnv = {};
  for (const key of ALLOWED_ENV) if (env[key] !== undefined) runnerEnv[key] = env[key];
  Object.assign(runnerEnv, ENV_OVERRIDES, {
    N8N_RUNNERS_TASK_BROKER_URI: brokerUri,
    N8N_RUNNERS_GRANT_TOKEN: grantToken,
    N8N_RUNNERS_HEALTH_CHECK_SERVER_ENABLED: 'true',
    N8N_RUNNERS_HEALTH_CHECK_SERVER_PORT: RUNNER_HEALTH_PORT,
  });
  if (runnerEnv.N8N_RUNNERS_AUTO_SHUTDOWN_TIMEOUT === undefined) runnerEnv.N8N_RUNNERS_AUTO_SHUTDOWN_TIMEOUT = '15';
  return new Promise((resolve) => {
    child = spawn(process.execPath, ['--disallow-code-generation-from-strings', '--disable-proto=delete', RUNNER_START],
      { cwd: env.HOME || '/home/runner', env: runnerEnv, stdio: 'inherit' });
    child.on('exit', (code, signal) => {
      child = null;
      if (code === 0) log('Runner process exited on idle timeout');
      else log(`Runner process exited with code ${code} signal ${signal}`);
      resolve();
    });
  });
}

async function main() {
  if (!authToken) fail('N8N_RUNNERS_AUTH_TOKEN is required');
  const unknown = runnerTypes.filter((type) => type !== 'javascript');
  if (runnerTypes.length === 0 || unknown.length > 0) {
    fail(`this stand-in runs the javascript runner only, not: ${unknown.join(', ') || '(none given)'}`);
  }
  http.createServer((req, res) => {
    const ok = req.method === 'GET' && req.url === '/healthz';
    res.writeHead(ok ? 200 : 404, { 'content-type': 'application/json' });
    res.end(ok ? '{"status":"ok"}' : '{}');
  }).listen(healthPort, '0.0.0.0');
  log(`Starting launcher for javascript, broker ${brokerUri}, health check on :${healthPort}`);
  while (!stopping) {
    await waitBrokerReady();
    let grant;
    try {
      grant = await fetchGrantToken();
    } catch (error) {
      fail(`failed to fetch grant token for launcher: ${error.message}`);
    }
    try {
      await handshake(grant, 'javascript');
    } catch (error) {
      if (!(error instanceof BrokerDown)) throw error;
      log(`Task broker is down, launcher will try to reconnect... (${error.message})`);
      await sleep(5000);
      continue;
    }
    let runnerGrant;
    try {
      runnerGrant = await fetchGrantToken();
    } catch (error) {
      fail(`failed to fetch grant token for runner: ${error.message}`);
    }
    log('Task ready for pickup, launching runner...');
    await runRunner(runnerGrant);
  }
}

for (const signal of ['SIGTERM', 'SIGINT']) {
  process.on(signal, () => {
    stopping = true;
    if (child === null) process.exit(0);
    log('Forwarding shutdown signal to runner, waiting for it to drain...');
    child.kill('SIGTERM');
    child.on('exit', () => process.exit(0));
  });
}

main().catch((error) => fail(error.stack || String(error)));
