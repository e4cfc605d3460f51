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

const DTYPES = { '<f4': ['float32', Float32Array], '<f8': ['float64', Float64Array], '<i8': ['int64', BigInt64Array],
                 '<i4': ['int32', Int32Array], '|b1': ['bool', Uint8Array] };

function readNpy(file) {
  const buf = fs.readFileSync(file);
  if (buf.toString('latin1', 0, 6) !== '\x93NUMPY') throw new Error(`${file}: not a .npy file`);
  const major = buf[6];
  const hlen = major === 1 ? buf.readUInt16LE(8) : buf.readUInt32LE(8);
  const off = major === 1 ? 10 : 12;
  const header = buf.toString('latin1', off, off + hlen);
  const descr = /'descr':\s*'([^']+)'/.exec(header)[1];
  const shape = /'shape':\s*\(([^)]*)\)/.exec(header)[1].split(',').map(s => s.trim()).filter(s => s).map(Number);
  const [type, Arr] = DTYPES[descr] || (() => { throw new Error(`${file}: dtype ${descr}`); })();
  const start = off + hlen;
  const data = new Arr(buf.buffer.slice(buf.byteOffset + start, buf.byteOffset + buf.length));
  return new ort.Tensor(type, type === 'bool' ? Array.from(data, v => v !== 0) : data, shape);
}

function writeNpy(file, t) {
  const descr = { float32: '<f4', float64: '<f8', int64: '<i8', int32: '<i4', bool: '|b1' }[t.type];
  const shape = t.dims.length === 1 ? `(${t.dims[0]},)` : `(${t.dims.join(', ')})`;
  let header = `{'descr': '${descr}', 'fortran_order': False, 'shape': ${shape}, }`;
  header += ' '.repeat(64 - ((10 + header.length + 1) % 64)) + '\n';
  const pre = Buffer.alloc(10);
  pre.write('\x93NUMPY', 0, 'latin1');
  pre[6] = 1; pre[7] = 0;
  pre.writeUInt16LE(header.length, 8);
  const data = t.type === 'bool' ? Buffer.from(t.data.map(v => v ? 1 : 0)) : Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength);
  fs.writeFileSync(file, Buffer.concat([pre, Buffer.from(header, 'latin1'), data]));
}

async function main() {
const [model, outdir, ...args] = process.argv.slice(2);
const feeds = {};
for (const a of args) {
  const eq = a.indexOf('=');
  feeds[a.slice(0, eq)] = readNpy(a.slice(eq + 1));
}
const session = await ort.InferenceSession.create(model, { graphOptimizationLevel: 'disabled', intraOpNumThreads: 1 });
const results = await session.run(feeds);
fs.mkdirSync(outdir, { recursive: true });
for (const [name, t] of Object.entries(results))
  writeNpy(path.join(outdir, name.replace(/[^A-Za-z0-9._-]/g, '_') + '.npy'), t);
console.log(`${Object.keys(results).length} outputs written to ${outdir}`);
}

main().catch(err => { console.error(`run_ort: ${err.message}`); process.exit(1); });
