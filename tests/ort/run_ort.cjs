// run_ort.cjs - runs an ONNX model in onnxruntime (CPU) on .npy inputs and writes .npy outputs.
//
//   node run_ort.cjs MODEL.onnx OUTDIR NAME=FILE.npy ...
//
// Used by tests/test_ort.c to check that graphdiet's training graphs run in a stock runtime and give
// the gradients graphdiet's own executor gives. onnxruntime-node is found through NODE_PATH.
'use strict';
const fs = require('node:fs');
const path = require('node:path');
const ort = require('onnxruntime-node');
const { readFeeds, writeNpy } = require('./npy.cjs');

async function main() {
const [model, outdir, ...all] = process.argv.slice(2);
const init = all.filter(a => a.startsWith('--init=')).map(a => a.slice(7));
const feeds = readFeeds(ort, all.filter(a => !a.startsWith('--init=')));
// --init=INIT.onnx: the training graph's TrainingInfoProto.initialization as a model of its own, its
// outputs named after the state they initialize: run once, first, as a trainer would
for (const m of init) {
  const s = await ort.InferenceSession.create(m, { graphOptimizationLevel: 'disabled', intraOpNumThreads: 1 });
  Object.assign(feeds, await s.run({}));
}
const session = await ort.InferenceSession.create(model, { graphOptimizationLevel: 'disabled', intraOpNumThreads: 1 });
const results = await session.run(feeds);
fs.mkdirSync(outdir, { recursive: true });
for (const [name, t] of Object.entries(results))
  writeNpy(path.join(outdir, name.replace(/[^A-Za-z0-9._-]/g, '_') + '.npy'), t);
console.log(`${Object.keys(results).length} outputs written to ${outdir}`);
}

main().catch(err => { console.error(`run_ort: ${err.message}`); process.exit(1); });
