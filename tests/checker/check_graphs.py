#!/usr/bin/env python3
"""check_graphs.py - every training graph graphdiet writes is one other tools accept.

    check_graphs.py BUILD_DIR [--keep DIR] [-k SUBSTRING]

Trains testdata's MLP, BatchNorm CNN (rescnn), transformer LM and an MLP with Dropout under each flag set below (the
checkpointing strategies, the --control-deps forms, the precisions, loss scaling, the optimizers,
diet variables, replicas and a few combinations) and fails on:

  - any error of onnx.checker.check_model(model, full_check=True) (which runs ONNX's shape
    inference with strict mode on);
  - a name used twice: two nodes of one graph (the main graph, its subgraphs and the
    TrainingInfoProto graphs) named alike, an input, output, initializer or value_info listed twice;
  - a domain that a node uses and opset_import does not declare;
  - for a graph of standard ops only (no graphdiet-domain node): onnxruntime refusing to load it,
    or printing any warning while it loads (its log severity set to warning).

Exit 0 when every graph passes, 1 otherwise, 77 (skipped, with the reason printed) without
python3-onnx, or without node (GRAPHDIET_NODE, or on PATH) and onnxruntime-node (in GRAPHDIET_ORT_DIR, or
BUILD_DIR/ort/node_modules). Graphs it cannot load: graphdiet-domain ops (AllReduce, DietAdam), which
only the checker leg sees; bf16 graphs onnxruntime's CPU provider has no kernel for (noted, not failed).
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(os.path.dirname(HERE))

# each model with the flags every case gets: the batch bound where it is symbolic (--checkpoint
# memory and auto need every dimension bound)
MODELS = [('mlp', ['--dim', 'batch=4']), ('rescnn', ['--dim', 'batch=4']), ('transformer', []),
          ('checker/dropout_mlp', [])]  # Dropout: its 16-bit gradient once made onnxruntime warn

# onnxruntime's CPU provider has no bfloat16 MatMul, Gemm or Conv: a bf16 graph may be refused for
# a missing kernel (and only for that), which says nothing about the file
NO_KERNEL = 'Could not find an implementation for'

# (name, flags): every strategy, control-dependency form, precision, loss scaling, optimizer,
# diet, replicas, and combinations of them
FLAGS = [
    ('plain', []),
    ('speed', ['--checkpoint', 'speed']),
    ('memory', ['--checkpoint', 'memory']),
    ('auto', ['--checkpoint', 'auto', '--budget', '100MiB']),
    ('memory_order', ['--checkpoint', 'memory', '--control-deps', 'order']),
    ('memory_data', ['--checkpoint', 'memory', '--control-deps', 'data']),
    ('fp16', ['--precision', 'fp16']),
    ('bf16', ['--precision', 'bf16']),
    ('fp16_fixed', ['--precision', 'fp16', '--loss-scale', 'fixed:1024']),
    ('fp16_dynamic', ['--precision', 'fp16', '--loss-scale', 'dynamic']),
    ('clip', ['--clip-grad-norm', '1']),
    ('sgd', ['--optimizer', 'sgd:lr=0.01,momentum=0.9']),
    ('adam', ['--optimizer', 'adam']),
    ('diet', ['--diet']),
    ('diet_adam', ['--diet', '--optimizer', 'adam']),
    ('replicas', ['--replicas', '2']),
    ('replicas_bucket', ['--replicas', '2', '--bucket-bytes', '4096']),
    ('replicas_adam', ['--replicas', '2', '--optimizer', 'adam']),
    ('replicas_syncbn', ['--replicas', '2', '--sync-batchnorm']),
    ('fp16_dynamic_adam_memory_data', ['--precision', 'fp16', '--loss-scale', 'dynamic', '--optimizer', 'adam',
                                       '--checkpoint', 'memory', '--control-deps', 'data']),
    ('bf16_clip_sgd_speed', ['--precision', 'bf16', '--clip-grad-norm', '1', '--optimizer', 'sgd',
                             '--checkpoint', 'speed']),
]

STANDARD = ('', 'ai.onnx')


def graphs(m):
    """Every graph of model m with a path naming it: the main graph, the TrainingInfoProto graphs,
    and each one's subgraphs (If/Loop/Scan bodies)."""
    todo = [('graph', m.graph)]
    for i, ti in enumerate(m.training_info):
        if ti.HasField('initialization'):
            todo.append(('training_info[%d].initialization' % i, ti.initialization))
        if ti.HasField('algorithm'):
            todo.append(('training_info[%d].algorithm' % i, ti.algorithm))
    while todo:
        where, g = todo.pop(0)
        yield where, g
        for n in g.node:
            for a in n.attribute:
                if a.HasField('g'):
                    todo.append(('%s/%s.%s' % (where, n.name, a.name), a.g))
                for k, sub in enumerate(a.graphs):
                    todo.append(('%s/%s.%s[%d]' % (where, n.name, a.name, k), sub))


def twice(names):
    seen, dup = set(), []
    for s in names:
        if s in seen and s not in dup:
            dup.append(s)
        seen.add(s)
    return dup


def problems(onnx, path):
    """What is wrong with the model at path, as lines; and whether all its nodes are standard."""
    m = onnx.load(path)
    out = []
    try:
        onnx.checker.check_model(m, full_check=True)
    except Exception as e:  # onnx raises ValidationError, or InferenceError from shape inference
        out.append('onnx.checker: ' + str(e).strip().replace('\n', ' | ')[:400])
    declared = {o.domain for o in m.opset_import}
    standard = True
    for where, g in graphs(m):
        for what, names in (('node name', [n.name for n in g.node]),
                            ('graph input', [v.name for v in g.input]),
                            ('graph output', [v.name for v in g.output]),
                            ('initializer', [t.name for t in g.initializer]),
                            ('value_info', [v.name for v in g.value_info])):
            dup = twice(names)
            if dup:
                out.append('%s: %d %ss used twice: %s' % (where, len(dup), what, ', '.join(dup[:5])))
        unnamed = sum(1 for n in g.node if not n.name)
        if unnamed:
            out.append('%s: %d nodes without a name' % (where, unnamed))
        for n in g.node:
            if n.domain not in STANDARD:
                standard = False
            if n.domain not in declared and not (n.domain in STANDARD and declared & set(STANDARD)):
                out.append("%s: node '%s' (%s) uses domain '%s', which opset_import does not declare"
                           % (where, n.name, n.op_type, n.domain))
    return out, standard


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('build')
    ap.add_argument('--keep', help='write the graphs here (default: a temporary folder)')
    ap.add_argument('-k', default='', help='only the cases whose name contains this')
    args = ap.parse_args()
    try:
        import onnx
    except ImportError:
        print('check_graphs: skipped: python3-onnx is not installed (apt-get install python3-onnx)')
        return 77
    ort_dir = os.environ.get('GRAPHDIET_ORT_DIR') or os.path.join(args.build, 'ort', 'node_modules')
    node = os.environ.get('GRAPHDIET_NODE') or None
    for d in [] if node else os.environ.get('PATH', '').split(os.pathsep):
        if os.access(os.path.join(d, 'node'), os.X_OK):
            node = os.path.join(d, 'node')
            break
    if not node or not os.access(node, os.X_OK):
        print('check_graphs: skipped: no node (apt-get install nodejs npm)')
        return 77
    if not os.path.exists(os.path.join(ort_dir, 'onnxruntime-node', 'package.json')):
        print('check_graphs: skipped: onnxruntime-node is not in %s '
              '(npm install --ignore-scripts --prefix %s/ort onnxruntime-node@1.30.0)' % (ort_dir, args.build))
        return 77
    binary = os.path.join(args.build, 'graphdiet')
    tmp = None
    if args.keep:
        os.makedirs(args.keep, exist_ok=True)
        outdir = args.keep
    else:
        tmp = tempfile.TemporaryDirectory(prefix='check_graphs.')
        outdir = tmp.name

    failures, to_load, n = [], [], 0
    skipped = []
    for model, common in MODELS:
        for name, flags in FLAGS:
            case = '%s_%s' % (os.path.basename(model), name)
            if args.k not in case:
                continue
            path = os.path.join(outdir, case + '.onnx')
            cmd = [binary, 'train', os.path.join(SOURCE, 'testdata', model + '.onnx'), '-o', path] + common + flags
            r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
            n += 1
            if r.returncode:
                failures.append('%s: graphdiet train %s: exit %d: %s' % (case, ' '.join(flags), r.returncode,
                                                                         r.stderr.strip()))
                continue
            bad, standard = problems(onnx, path)
            failures += ['%s: %s' % (case, b) for b in bad]
            if standard:
                to_load.append(path)

    # onnxruntime: one process loads them all; each session's log id is its file, so that a warning
    # names the graph it is about
    if to_load:
        env = dict(os.environ, NODE_PATH=ort_dir)
        r = subprocess.run([node, os.path.join(HERE, 'load_ort.cjs')] + to_load, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, universal_newlines=True, env=env)
        for line in r.stdout.splitlines():
            if line.startswith('REFUSED '):
                path, _, msg = line[8:].partition(': ')
                if '_bf16' in path and msg.startswith(NO_KERNEL):
                    skipped.append('%s: onnxruntime has no kernel: %s' % (os.path.basename(path)[:-5], msg))
                    continue
                failures.append('%s: onnxruntime refuses it: %s' % (os.path.basename(path)[:-5], msg))
        warned = {}
        for line in r.stderr.splitlines():
            line = re.sub(r'\x1b\[[0-9;]*m', '', line)
            mt = re.search(r'\[[WE]:onnxruntime:(.*?\.onnx),', line)
            if mt:
                warned.setdefault(os.path.basename(mt.group(1))[:-5], []).append(line.split('] ', 1)[-1])
            elif line.strip():
                failures.append('onnxruntime: ' + line.strip())
        for case, lines in sorted(warned.items()):
            failures.append('%s: onnxruntime prints %d warnings, the first: %s' % (case, len(lines), lines[0][:300]))
        if r.returncode:
            failures.append('load_ort.cjs: exit %d' % r.returncode)

    for f in skipped:
        print('note: ' + f)
    for f in failures:
        print(f)
    print('check_graphs: %d graphs written and checked, %d of standard ops loaded in onnxruntime; %d problems'
          % (n, len(to_load), len(failures)))
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
