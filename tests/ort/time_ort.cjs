// time_ort.cjs - wall times of N onnxruntime runs (CPU) of a model on .npy inputs, after a warm-up.
//
//   node time_ort.cjs MODEL.onnx N THREADS NAME=FILE.npy ...
//
// Prints "seconds MEDIAN best BEST" (intra-op threads THREADS, default graph optimisations). Used by
// tests/bench/run_step.py, which times graphdiet's executor and PyTorch on the same step and inputs.
'use strict';
const { performance } = require('node:perf_hooks');
const ort = require('onnxruntime-node');
const { readFeeds } = require('./npy.cjs');

async function main() {
  const [model, n, threads, ...args] = process.argv.slice(2);
  const feeds = readFeeds(ort, args);
  const session = await ort.InferenceSession.create(model, { intraOpNumThreads: Number(threads), interOpNumThreads: 1 });
  const t = [];
  for (let i = 0; i <= Number(n); i++) {
    const t0 = performance.now();
    await session.run(feeds);
    if (i) t.push((performance.now() - t0) / 1000); // run 0 warms up
  }
  t.sort((a, b) => a - b);
  console.log(`seconds ${t[Math.floor(t.length / 2)].toFixed(6)} best ${t[0].toFixed(6)}`);
}

main().catch(err => { console.error(`time_ort: ${err.message}`); process.exit(1); });
