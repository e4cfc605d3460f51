// time_ort.cjs - best wall time of N onnxruntime runs (CPU, one thread) of a model on .npy inputs.
//
//   node time_ort.cjs MODEL.onnx N NAME=FILE.npy ...
//
// Prints "seconds S". Used by tests/bench/run_step.py next to graphdiet's and PyTorch's times.
'use strict';
const { performance } = require('node:perf_hooks');
const ort = require('onnxruntime-node');
const { readFeeds } = require('./npy.cjs');

async function main() {
  const [model, n, ...args] = process.argv.slice(2);
  const feeds = readFeeds(ort, args);
  const session = await ort.InferenceSession.create(model, { intraOpNumThreads: 1, interOpNumThreads: 1 });
  let best = Infinity;
  for (let i = 0; i <= Number(n); i++) {
    const t = performance.now();
    await session.run(feeds);
    const dt = (performance.now() - t) / 1000;
    if (i && dt < best) best = dt; // run 0 warms up
  }
  console.log(`seconds ${best.toFixed(6)}`);
}

main().catch(err => { console.error(`time_ort: ${err.message}`); process.exit(1); });
