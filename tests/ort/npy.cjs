// npy.cjs - NumPy .npy files as onnxruntime tensors, and back (float32/64, int32/64, bool).
'use strict';
const fs = require('node:fs');

const DTYPES = { '<f4': ['float32', Float32Array], '<f8': ['float64', Float64Array], '<i8': ['int64', BigInt64Array],
                 '<i4': ['int32', Int32Array], '|b1': ['bool', Uint8Array] };

function readNpy(ort, file) {
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

// NAME=FILE.npy arguments as onnxruntime feeds.
function readFeeds(ort, args) {
  const feeds = {};
  for (const a of args) {
    const eq = a.indexOf('=');
    feeds[a.slice(0, eq)] = readNpy(ort, a.slice(eq + 1));
  }
  return feeds;
}

module.exports = { readNpy, readFeeds, writeNpy };
