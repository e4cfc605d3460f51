// mem_ort.cjs - what one onnxruntime training step adds to the process's peak memory.
//
//   node mem_ort.cjs MODEL.onnx [--disable-arena] [--opt LEVEL] NAME=FILE.npy ...
//
// Creates the session, reads the inputs, runs once, and prints
//   base_kib B   peak_kib P   step_kib P-B
// from the process's peak resident set (getrusage maxrss) before and after the run. Inputs that
// are not given are left out (the session then fails naming them). Used by
// tests/bench/run_ort_memory.sh to see whether a checkpointed graph's saving survives
// onnxruntime's own scheduler and allocator.
'use strict';
const ort = require('onnxruntime-node');
const { readFeeds } = require('./npy.cjs');

async function main() {
  const args = process.argv.slice(2);
  const model = args.shift();
  const opts = { intraOpNumThreads: 1, interOpNumThreads: 1 };
  while (args.length && args[0].startsWith('--')) {
    const a = args.shift();
    if (a === '--disable-arena') opts.enableCpuMemArena = false;
    else if (a === '--opt') opts.graphOptimizationLevel = args.shift();
    else throw new Error(`unknown option ${a}`);
  }
  const feeds = readFeeds(ort, args);
  const session = await ort.InferenceSession.create(model, opts);
  const base = process.resourceUsage().maxRSS;
  await session.run(feeds);
  const peak = process.resourceUsage().maxRSS;
  console.log(`base_kib ${base} peak_kib ${peak} step_kib ${peak - base}`);
}

main().catch(err => { console.error(`mem_ort: ${err.message}`); process.exit(1); });
