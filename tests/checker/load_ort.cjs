// load_ort.cjs - loads ONNX models in onnxruntime (CPU), logging at warning severity.
//
//   node load_ort.cjs MODEL.onnx ...
//
// Used by tests/checker/check_graphs.py: each session gets the model's file name as its log id, so
// that every warning onnxruntime prints on standard error names the model it is about. A model
// that fails to load is reported as "REFUSED <model>: <message>" on standard output; exit 0.
'use strict';
const ort = require('onnxruntime-node');

async function main() {
  ort.env.logLevel = 'warning';
  for (const model of process.argv.slice(2)) {
    try {
      await ort.InferenceSession.create(model, { logSeverityLevel: 2, logId: model, intraOpNumThreads: 1 });
    } catch (err) {
      console.log(`REFUSED ${model}: ${String(err.message).split('\n')[0]}`);
    }
  }
}

main().catch(err => { console.error(`load_ort: ${err.message}`); process.exit(1); });
