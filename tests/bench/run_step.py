#!/usr/bin/python3
"""Training-step benchmark: graphdiet's executor against PyTorch CPU and onnxruntime, one step each.

    /usr/bin/python3 tests/bench/run_step.py [BUILD_DIR] [--testdata] [--threads 1,2] [--rounds 7]
                                             [--models NAME,NAME]

--testdata times the testdata models at their own sizes (the inputs gen_models.py saved); by
default the same classes run at sizes where compute, not per-op overhead, decides, then issue
#25's sizes (an MLP of 4 x 1024 at batch 256, its second CNN of three BatchNorm residual blocks of
32 channels at batch 16, 32x32, and d256 transformers of 2 and 4 blocks at seq 128 and batch 8)
and two zoo models (torchvision ResNet-18 at batch 16, 64x64, and gen_zoo's GPT, built of
nn.TransformerEncoderLayer with dropout on, at d256, 4 layers, seq 128, batch 8), then issue #52's
real sizes (an MLP of 3 x 2048 at batch 512, torchvision ResNet-50 and MobileNetV2 at batch 8,
96x96, a BERT-style encoder of 6 d384 layers at seq 128, batch 8, and an LSTM language model of
2 x 512 at seq 64, batch 16). --models keeps the models whose names start with one of NAME. The
table is headed by the CPU model. The LSTM's graphdiet file is written with train --fused-rnn (one
RecurrentGrad node per LSTM, which onnxruntime cannot run: it times the standard-ops file).

Each model is exported as testdata is (opset 17, training mode) and `graphdiet train` writes its
training graph (forward, backward, every parameter's gradient). All three run the same step on the
same inputs:
  - PyTorch: the model's forward and loss.backward();
  - graphdiet: the training graph file in its executor (bench_exec, the nodes' time);
  - onnxruntime-node: the same training graph file (default graph optimisations).
With T threads everywhere (torch.set_num_threads, OPENBLAS_NUM_THREADS, onnxruntime's intra-op
threads), for each T of --threads. Debian's PyTorch multiplies matrices with OpenBLAS (libblas.so.3),
whose threads torch.set_num_threads does not set: its openblas_set_num_threads is called too, or
PyTorch's "1 thread" would multiply on every core. Rounds interleave the three (PyTorch,
graphdiet, onnxruntime, then again), each round a median of N runs after a warm-up, N the same for
all three: 5, or as many as a quarter of a second of PyTorch steps (at most 200), so that a small
model's round is not a few milliseconds that one stall on a shared machine decides. The table
gives the median over the rounds (default 7) and the ratios graphdiet / peer (below 1: graphdiet
is faster), each followed by the range of the rounds' own ratios (both timed in that round). Each
peer starts half a second after the last one ended, when the last one's threads have stopped
spinning.

With 2 threads or more each round also times a cache line's round trip between CPUs 0 and 1
(bench_xcore) before each engine and after the last, and the last column gives the median and
highest of those, in ns. Where the host moved the vCPUs during the run, the row is followed by one
for the rounds whose four round trips all said one die (below 150 ns) and one for those that all
said two dies, so that each ratio compares engines timed on the same placement. On this project's
virtual machine it is about 60 ns, and at times about 330 ns for minutes together, when the host
has put the two vCPUs on different dies: then every kernel cut over the threads pays for moving
its data (graphdiet's unrolled RNN step at 2 threads doubles, onnxruntime's ResNet step more than
doubles), and a row timed then says so.
"""
import os
import subprocess
import sys
import tempfile
import time

import ctypes

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
sys.path.insert(0, os.path.join(ROOT, "testdata"))
import gen_models as gm  # noqa: E402

def configs():
    g = torch.Generator().manual_seed(0)
    yield "mlp", gm.MLP(), (torch.randn(256, 20, generator=g), torch.randint(0, 10, (256,), generator=g))
    yield "tanh_chain (w256)", gm.TanhChain(depth=12, width=256), (torch.randn(64, 256, generator=g),
                                                                   torch.randn(64, 256, generator=g))
    yield "rescnn", gm.ResCNN(), (torch.randn(16, 3, 32, 32, generator=g), torch.randint(0, 10, (16,), generator=g))
    yield "transformer (d128)", gm.Transformer(vocab=1000, d=128, heads=4, seq=64), (
        torch.randint(0, 1000, (8, 64), generator=g), torch.randint(0, 1000, (8, 64), generator=g))
    yield "rnn (d128, 16 steps)", gm.UnrolledRNN(d=128, steps=16), (torch.randn(32, 16, 128, generator=g),
                                                                      torch.randint(0, 4, (32,), generator=g))
    yield "unet (64x64)", gm.UNet(), (torch.randn(4, 3, 64, 64, generator=g), torch.randint(0, 2, (4, 64, 64), generator=g))
    yield "mlp4x1024 (b256)", Deep(), (torch.randn(256, 1024, generator=g), torch.randint(0, 10, (256,), generator=g))
    yield "rescnn32 (3 blocks, 32 ch, b16)", ResCNN32(), (torch.randn(16, 3, 32, 32, generator=g),
                                                        torch.randint(0, 10, (16,), generator=g))
    torch.manual_seed(0)
    yield "tf256x2 (2 blocks, seq 128, b8)", gm.Transformer(vocab=512, d=256, heads=4, seq=128), (
        torch.randint(0, 512, (8, 128), generator=g), torch.randint(0, 512, (8, 128), generator=g))
    torch.manual_seed(0)
    tf = gm.Transformer(vocab=512, d=256, heads=4, seq=128)
    tf.blocks = torch.nn.ModuleList([gm.TBlock(256, 4) for _ in range(4)])
    yield "tf256 (4 blocks, seq 128, b8)", tf, (torch.randint(0, 512, (8, 128), generator=g),
                                               torch.randint(0, 512, (8, 128), generator=g))
    import torchvision
    import gen_zoo
    torch.manual_seed(0)
    yield "resnet18 (b16, 64x64)", gen_zoo.Classify(torchvision.models.resnet18(num_classes=10)), (
        torch.randn(16, 3, 64, 64, generator=g), torch.randint(0, 10, (16,), generator=g))
    torch.manual_seed(0)
    yield "gpt (d256, 4 layers, seq 128, b8)", gen_zoo.GPT(vocab=512, d=256, heads=4, layers=4, seq=128), (
        torch.randint(0, 512, (8, 128), generator=g), torch.randint(0, 512, (8, 128), generator=g))
    # issue #52's sizes
    torch.manual_seed(0)
    yield "mlp3x2048 (b512)", Deep(width=2048, depth=3), (torch.randn(512, 2048, generator=g),
                                                         torch.randint(0, 10, (512,), generator=g))
    torch.manual_seed(0)
    yield "resnet50 (b8, 96x96)", gen_zoo.Classify(torchvision.models.resnet50(num_classes=10)), (
        torch.randn(8, 3, 96, 96, generator=g), torch.randint(0, 10, (8,), generator=g))
    torch.manual_seed(0)
    yield "bert (d384, 6 layers, seq 128, b8)", Bert(), (torch.randint(0, Bert.VOCAB, (8, 128), generator=g),
                                                        torch.randint(0, Bert.VOCAB, (8, 128), generator=g))
    torch.manual_seed(0)
    yield "mobilenet_v2 (b8, 96x96)", gen_zoo.Classify(torchvision.models.mobilenet_v2(num_classes=10, dropout=0.0)), (
        torch.randn(8, 3, 96, 96, generator=g), torch.randint(0, 10, (8,), generator=g))
    torch.manual_seed(0)
    yield "lstm_lm (2x512, seq 64, b16)", LstmLM(), (torch.randint(0, LstmLM.V, (LstmLM.T, LstmLM.B), generator=g),
                                                    torch.randint(0, LstmLM.V, (LstmLM.T, LstmLM.B), generator=g))


class Deep(torch.nn.Module):
    """Issue #25's MLP: four 1024-wide ReLU layers and a 10-way cross-entropy head (issue #52's: three
    of 2048)."""

    def __init__(self, width=1024, depth=4):
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(width, width) for _ in range(depth))
        self.head = torch.nn.Linear(width, 10)

    def forward(self, x, target):
        for f in self.layers:
            x = torch.relu(f(x))
        return torch.nn.functional.cross_entropy(self.head(x), target)


class ResCNN32(torch.nn.Module):
    """Issue #25's second CNN: the ResCNN's stem and head around three BatchNorm residual blocks of 32
    channels."""

    def __init__(self):
        super().__init__()
        self.stem = torch.nn.Conv2d(3, 32, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(32)
        self.blocks = torch.nn.Sequential(*(gm.Block(32) for _ in range(3)))
        self.fc = torch.nn.Linear(32, 10)

    def forward(self, x, target):
        h = torch.nn.functional.max_pool2d(torch.relu(self.bn(self.stem(x))), 2)
        h = torch.nn.functional.adaptive_avg_pool2d(self.blocks(h), 1).flatten(1)
        return torch.nn.functional.cross_entropy(self.fc(h), target)


class Bert(torch.nn.Module):
    """Issue #52's BERT-style encoder: token and position embeddings, 6 post-norm
    nn.TransformerEncoderLayer blocks of d384 (6 heads, feed-forward 1536, GELU, dropout 0), a final
    LayerNorm and a masked-LM head over every position."""
    VOCAB = 8192

    def __init__(self, d=384, heads=6, layers=6, seq=128):
        super().__init__()
        self.tok = torch.nn.Embedding(self.VOCAB, d)
        self.pos = torch.nn.Embedding(seq, d)
        self.blocks = torch.nn.ModuleList(
            torch.nn.TransformerEncoderLayer(d, heads, 4 * d, dropout=0.0, activation="gelu", batch_first=True)
            for _ in range(layers))
        self.norm = torch.nn.LayerNorm(d)
        self.head = torch.nn.Linear(d, self.VOCAB)

    def forward(self, tokens, target):
        h = self.tok(tokens) + self.pos(torch.arange(tokens.shape[1], device=tokens.device))
        for b in self.blocks:
            h = b(h)
        logits = self.head(self.norm(h))
        return torch.nn.functional.cross_entropy(logits.reshape(-1, self.VOCAB), target.reshape(-1))


class LstmLM(torch.nn.Module):
    """Issue #52's LSTM language model: embedding 256, nn.LSTM of 2 layers of 512, seq 64 (time-major),
    batch 16, vocab 2000."""
    V, E, H, L, T, B = 2000, 256, 512, 2, 64, 16

    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(self.V, self.E)
        self.lstm = torch.nn.LSTM(self.E, self.H, self.L)
        self.out = torch.nn.Linear(self.H, self.V)

    def forward(self, x, target):
        y, _ = self.lstm(self.emb(x))
        return torch.nn.functional.cross_entropy(self.out(y).reshape(-1, self.V), target.reshape(-1))


def testdata_configs():
    for name, model, args, names, dynamic in gm.models():
        yield name, model, args


# Models whose graphdiet training graph takes options of graphdiet's own, which onnxruntime cannot
# run: graphdiet times that file, onnxruntime the standard-ops one (the row's name says so).
GD_TRAIN_OPTS = {"lstm_lm": ["--fused-rnn"]}

INNER = 5     # runs a round, at least
SPAN = 0.25   # seconds of PyTorch steps a round takes, at least


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2]


def torch_threads(n):
    """PyTorch's threads: its own, and those of the OpenBLAS it calls for products."""
    torch.set_num_threads(n)
    try:
        blas = ctypes.CDLL("libblas.so.3")
        if hasattr(blas, "openblas_set_num_threads"):
            blas.openblas_set_num_threads(n)
    except OSError:
        pass


def settle():
    """Lets the last peer's idle threads stop spinning (PyTorch's OpenMP and OpenBLAS threads spin
    for up to about a tenth of a second after their work) before the next one is timed: on 2 cores
    a spinning thread would halve the next peer's 2-thread speed."""
    time.sleep(0.5)


def inner_runs(fn):
    """How many runs a round takes: INNER, or as many as fill SPAN seconds of fn's (at most 200)."""
    fn()
    s = time.perf_counter()
    fn()
    return max(INNER, min(200, int(SPAN / max(time.perf_counter() - s, 1e-6))))


def torch_median(fn, runs):
    settle()
    fn()
    t = []
    for _ in range(runs):
        s = time.perf_counter()
        fn()
        t.append(time.perf_counter() - s)
    return median(t)


def seconds(cmd, env):
    settle()
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
    return float(out.split()[1])


ONE_DIE_NS = 150  # a round trip below this: the two vCPUs share a die (about 60 ns), else about 330


def placement(trips):
    """Where the vCPUs were during a round, from the round trips timed before and after each engine:
    "one die", "two dies", or "moved" when the host moved them within the round."""
    if not trips:
        return "one die"
    low = [t < ONE_DIE_NS for t in trips]
    return "one die" if all(low) else "two dies" if not any(low) else "moved"


def print_row(name, threads, t_torch, t_gd, t_ort, trip, tag):
    pt, g, o = median(t_torch), median(t_gd), median(t_ort) if t_ort else float("nan")
    rt = f"{median(trip):.0f} (max {max(trip):.0f})" if trip else ""
    print(f"| {name} | {threads}{tag} | {pt:.5f} | {g:.5f} | {o:.5f} | {g / pt:.2f} {spread(t_gd, t_torch)} | "
          f"{g / o:.2f} {spread(t_gd, t_ort)} | {rt} |", flush=True)


def spread(ours, peer):
    """The lowest and highest of the rounds' own ratios (ours / peer, both timed in that round), so
    that a median ratio near 1 can be told from the noise between rounds."""
    r = [a / b for a, b in zip(ours, peer)]
    return f"({min(r):.2f}-{max(r):.2f})" if r else ""


def main():
    argv = sys.argv[1:]
    if "-h" in argv or "--help" in argv:
        print(__doc__.strip())
        return
    opt = {"--threads": "1,2", "--rounds": "7", "--models": ""}
    for k in opt:
        if k in argv:
            i = argv.index(k)
            opt[k] = argv[i + 1]
            del argv[i:i + 2]
    argv = [a for a in argv if a != "--testdata"]
    build = argv[0] if argv else os.path.join(ROOT, "build")
    which = testdata_configs if "--testdata" in sys.argv else configs
    bench = os.path.join(build, "tests", "bench", "bench_exec")
    xcore = os.path.join(build, "tests", "bench", "bench_xcore")
    gd = os.path.join(build, "graphdiet")
    ort_dir = os.path.join(build, "ort", "node_modules")
    have_ort = os.path.isdir(ort_dir)
    rounds = int(opt["--rounds"])
    cpu = [ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")]
    print(f"CPU: {cpu[0] if cpu else 'unknown'} ({len(cpu)} logical CPUs), OPENBLAS_CORETYPE="
          f"{os.environ.get('OPENBLAS_CORETYPE', '(unset)')}, PyTorch {torch.__version__}\n")
    print("| model | threads | PyTorch step s | graphdiet step s | onnxruntime step s | graphdiet / PyTorch | "
          "graphdiet / onnxruntime | core round trip ns |")
    print("|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for name, model, args in which():
            if opt["--models"] and not any(name.startswith(m) for m in opt["--models"].split(",")):
                continue
            path, train = os.path.join(tmp, "m.onnx"), os.path.join(tmp, "t.onnx")
            torch.onnx.export(model, args, path, input_names=["x", "target"], output_names=["loss"], opset_version=17,
                              training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
            subprocess.run([gd, "train", path, "-o", train], check=True, capture_output=True)
            ours = train  # graphdiet's file: the same, or with its own options (GD_TRAIN_OPTS)
            opts = next((o for m, o in GD_TRAIN_OPTS.items() if name.startswith(m)), None)
            if opts:
                ours = os.path.join(tmp, "tg.onnx")
                subprocess.run([gd, "train", path, "-o", ours] + opts, check=True, capture_output=True)
                name = f"{name} [graphdiet: train {' '.join(opts)}]"
            feeds = []
            for n, a in zip(["x", "target"], args):
                f = os.path.join(tmp, n + ".npy")
                np.save(f, a.numpy())
                feeds.append(f"{n}={f}")

            def step():
                model.zero_grad(set_to_none=True)
                model(*args).backward()

            for threads in [int(t) for t in opt["--threads"].split(",")]:
                torch_threads(threads)
                env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads), NODE_PATH=ort_dir)
                t_torch, t_gd, t_ort, trip, where = [], [], [], [], []
                runs = inner_runs(step)

                def trips():
                    """the round trip now, with 2 threads or more (else nothing)"""
                    if threads > 1:
                        trip.append(seconds([xcore], env))
                        return [trip[-1]]
                    return []

                for _ in range(rounds):
                    seen = trips()
                    t_torch.append(torch_median(step, runs))
                    seen += trips()
                    t_gd.append(seconds([bench, ours, "--repeat", str(runs), "--threads", str(threads)] +
                                        [a for f in feeds for a in ("--input", f)], env))
                    seen += trips()
                    if have_ort:
                        t_ort.append(seconds(["node", os.path.join(ROOT, "tests", "ort", "time_ort.cjs"), train,
                                              str(runs), str(threads)] + feeds, env))
                    seen += trips()
                    where.append(placement(seen))
                print_row(name, threads, t_torch, t_gd, t_ort, trip, "")
                # rounds whose three engines all ran on one die, or all across two, apart, when the
                # host moved the vCPUs during the run: a ratio compares like with like
                for w in ("one die", "two dies"):
                    k = [i for i, p in enumerate(where) if p == w]
                    if k and len(set(where)) > 1:
                        print_row(name, threads, [t_torch[i] for i in k], [t_gd[i] for i in k],
                                  [t_ort[i] for i in k] if t_ort else [], [trip[4 * i + j] for i in k for j in range(4)],
                                  f", {w}: {len(k)} of {rounds} rounds")


if __name__ == "__main__":
    main()
