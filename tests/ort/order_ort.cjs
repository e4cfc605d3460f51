// order_ort.cjs - the order onnxruntime (CPU, default options, one thread) runs a model's nodes in.
//
//   node order_ort.cjs MODEL.onnx NAME=FILE.npy ...
//
// Runs once with profiling on and prints the name of each node it ran, in order, one per line
// (nodes onnxruntime made itself, by fusing or inlining, under their own names). Used by
// tests/test_ort.c to check that --control-deps data pins graphdiet's schedule there.
'use strict';
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const ort = require('onnxruntime-node');
const { readFeeds } = require('./npy.cjs');

async function main() {
  const [model, ...args] = process.argv.slice(2);
  const feeds = readFeeds(ort, args);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'order_ort-'));
  const session = await ort.InferenceSession.create(model, {
    intraOpNumThreads: 1, interOpNumThreads: 1, enableProfiling: true, profileFilePrefix: path.join(dir, 'p') });
  await session.run(feeds);
  session.endProfiling();
  const file = fs.readdirSync(dir).map(f => path.join(dir, f))[0];
  const events = JSON.parse(fs.readFileSync(file, 'utf8'));
  fs.rmSync(dir, { recursive: true, force: true });
  const suffix = '_kernel_time';
  for (const ev of events)
    if (ev.cat === 'Node' && ev.name.endsWith(suffix))
      console.log(ev.name.slice(0, -suffix.length));
}

main().catch(err => { console.error(`order_ort: ${err.message}`); process.exit(1); });
