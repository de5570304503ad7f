// Runs a rendered k6 script's default function for iterations 0..N-1 against a receiver that checks what
// signed-webhook checks (size, HMAC-SHA256 signature, JSON, schema), then writes what was sent and the k6
// `--out json` points. Usage: node harness.mjs SCRIPT N OUT_DIR; env SECRET ('' = unsigned), MAX_BODY.
import { createHmac } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import exec from './execution.mjs';
import { points } from './metrics.mjs';

const [script, count, outDir] = process.argv.slice(2);
const secret = process.env.SECRET || '';
const maxBody = Number(process.env.MAX_BODY);
const sent = [];
let executions = 0;

globalThis.open = (path) => readFileSync(path, 'utf8');
globalThis.__receive = (url, body, headers) => {
  sent.push({ url, body, headers });
  if (Buffer.byteLength(body) > maxBody) {
    return { status: 413, body: '{"message":"too large"}' };
  }
  if (secret !== '') {
    const want = 'sha256=' + createHmac('sha256', secret).update(body).digest('hex');
    if (headers['X-Signature'] !== want) {
      return { status: 401, body: '{"message":"bad signature"}' };
    }
  }
  let doc;
  try {
    doc = JSON.parse(body);
  } catch (e) {
    return { status: 422, body: '{"code":422,"message":"Failed to parse request body"}' };
  }
  if (typeof doc.event !== 'string') {
    executions += 1;
    return { status: 422, body: JSON.stringify({ message: 'schema', executionId: String(executions) }) };
  }
  executions += 1;
  return { status: 200, body: JSON.stringify([{ executionId: String(executions) }]) };
};

const mod = await import(pathToFileURL(script).href);
for (let i = 0; i < Number(count); i += 1) {
  exec.scenario.iterationInTest = i;
  mod.default();
}
writeFileSync(join(outDir, 'sent.json'), JSON.stringify(sent));
const time = new Date().toISOString();
writeFileSync(join(outDir, 'points.json'), points.map((p) => JSON.stringify(
  { metric: p.metric, type: 'Point', data: { time, value: p.value, tags: { scenario: 'step' }, metadata: p.metadata } },
)).join('\n') + '\n');
