"""w8a8.scaled_mm_reduce_scatter on CPU ranks (NumPy, w8a8.Comm.world) with partials="fp32" and "out",
against the header's arithmetic written in NumPy (w8a8_ref.py), bit for bit (int8):
  p_j = sb_j*(sa_j*v_j) in fp32 (scaled_mm's epilogue without bias);
  "fp32": s = ((p_0 + p_1) + ...) in rank order (fp32), + bias, rounded once to out's dtype;
  "out":  q_j = p_j rounded to out's dtype (RNE) and widened back, then the same sum, + bias, rounded.
Overlap on and off, bf16 / fp16 / fp32 out; the ranks are separate processes started fresh (never forked
from this one): W = 1 as a plain child process (an MPI singleton), W = 2 under mpirun where it exists.
An invalid partials value is refused before anything reaches the library.
Skips where NumPy is missing, or where libw8a8 has no MPI (the worker reports NOT_BUILT: exit 77)."""
import os
import shutil
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, HERE)

try:
    import numpy as np
except ImportError:  # pragma: no cover
    np = None

SKIP_RC = 77
WORKER_ENV = "W8A8_NUMPY_TP_WORKER"


def _worker():
    import w8a8
    import w8a8.numpy as wn
    import w8a8_ref as ref
    try:
        comm = w8a8.Comm.world(num_threads=1)
    except w8a8.W8A8Error as e:
        if e.status == w8a8.Status.ERROR_NOT_BUILT:
            print("skip: %s" % e)
            return SKIP_RC
        raise
    W, me = comm.size, comm.rank
    bad = 0
    differs = {}
    for case, (od, M, N, Kj) in enumerate([("bf16", 13, 24, 40), ("fp16", 9, 17, 33), ("fp32", 6, 8, 20)]):
        r = np.random.default_rng(1234 + case)  # every rank draws every rank's inputs
        a = [r.integers(-128, 128, size=(M, Kj + j)).astype(np.int8) for j in range(W)]
        w = [r.integers(-128, 128, size=(N, Kj + j)).astype(np.int8) for j in range(W)]
        sa = [(r.uniform(0.5, 2.0, size=(M, 1)) * 2.0 ** -6).astype(np.float32) for _ in range(W)]
        sb = [(r.uniform(0.5, 2.0, size=(1, N)) * 2.0 ** -5).astype(np.float32) for _ in range(W)]
        bias_f = r.uniform(-4, 4, size=(N,)).astype(np.float32)
        if od == "bf16":
            bits = ref.bf16_encode(bias_f)
            bias, bias_f = bits.view(wn.bf16_dtype()), ref.bf16_decode(bits)
        elif od == "fp16":
            bias = bias_f.astype(np.float16)
            bias_f = bias.astype(np.float32)
        else:
            bias = bias_f
        off, rows = w8a8.shard_rows(M, W, me)
        want = {}
        for mode in ("fp32", "out"):
            s = None
            for j in range(W):
                p = ref.scaled_mm_int8(a[j], w[j].T, sa[j], sb[j])  # fp32, no bias
                if mode == "out":
                    p = ref.out_float(ref.to_out(p, od), od)
                s = p if s is None else (s + p).astype(np.float32)
            s = (s + bias_f.reshape(1, N)).astype(np.float32)
            want[mode] = ref.out_bits(ref.to_out(s, od), od)[off:off + rows]
        differs[od] = bool(np.any(want["fp32"] != want["out"]))
        for mode in ("fp32", "out"):
            for overlap in (True, False):
                got = w8a8.scaled_mm_reduce_scatter(comm, a[me], w[me].T, sa[me], sb[me], out_dtype=od, bias=bias,
                                                    overlap=overlap, partials=mode)
                if got.shape != (rows, N) or not np.array_equal(ref.out_bits(got, od), want[mode]):
                    bad += 1
                    print("rank %d of %d: %s out, partials=%s, overlap=%s: differs from the reference" %
                          (me, W, od, mode, overlap))
    # The two modes must be told apart by the data (16-bit outs), else this test could not fail.
    for od in ("bf16", "fp16"):
        if not differs[od]:
            bad += 1
            print("rank %d: the data does not separate partials=fp32 from partials=out for %s" % (me, od))
    if differs["fp32"]:
        bad += 1
        print("rank %d: with an fp32 out both modes must be the same arithmetic" % me)
    # A check of the bindings that fails on one rank only, before the library's collective:
    # that rank still takes part in it (a descriptor the library refuses), so the peers fail with COMM_MISMATCH instead
    # of waiting for it (this test's timeout would catch a hang); then the communicator still works.
    aa, ww = np.ones((4, 8), np.int8), np.ones((4, 8), np.int8)
    sb_bad = np.ones(4, np.float64 if me == 0 else np.float32)
    try:
        w8a8.all_gather_scaled_mm(comm, aa, ww.T, 1.0, sb_bad, out_dtype="fp32")
        if W > 1:
            bad += 1
            print("rank %d: a float64 scale_b on rank 0 was accepted" % me)
    except w8a8.W8A8Error as e:
        want = w8a8.Status.ERROR_INVALID_SCALE if me == 0 else w8a8.Status.ERROR_COMM_MISMATCH
        if e.status != want:
            bad += 1
            print("rank %d: a float64 scale_b on rank 0: %s, expected %s" % (me, e, want))
    try:
        w8a8.scaled_mm_reduce_scatter(comm, aa, ww.T, 1.0, np.ones(4, np.float32), out=(np.ones((4, 4)) if me == 0 else
                                                                                          None))
        if W > 1:
            bad += 1
            print("rank %d: a float64 out on rank 0 was accepted" % me)
    except w8a8.W8A8Error as e:
        want = w8a8.Status.ERROR_INVALID_DTYPE if me == 0 else w8a8.Status.ERROR_COMM_MISMATCH
        if e.status != want and not (me == 0 and e.status == w8a8.Status.ERROR_INVALID_VALUE):
            bad += 1
            print("rank %d: a float64 out on rank 0: %s" % (me, e))
    # The gathered arrays follow the caller's out (M = 5: shards of 3 and 2 at W = 2), and the out dtype and the
    # scales may be numpy's dtype classes and scalars, as in w8a8.scaled_mm.
    M5 = 5
    _, r5 = w8a8.shard_rows(M5, W, me)
    o5 = np.zeros((M5, 4), np.float32)
    got, gath = w8a8.all_gather_scaled_mm(comm, np.full((r5, 8), 2, np.int8), ww.T, np.float32(0.5),
                                          np.ones(4, np.float32), out=o5, return_gathered=True)
    if got is not o5 or gath[0].shape != (M5, 8) or gath[1].shape != (M5,) or not np.all(o5 == 8.0) or \
            not np.all(gath[0] == 2) or not np.all(gath[1] == 0.5):
        bad += 1
        print("rank %d: return_gathered with out of %d rows: out %s, gathered %s" % (me, M5, o5.ravel()[:4],
                                                                                   [g.shape for g in gath]))
    o6 = w8a8.all_gather_scaled_mm(comm, aa, ww.T, np.float32(1), np.ones(4, np.float32), out_dtype=np.float32)
    if o6.dtype != np.float32 or o6.shape != (4 * W, 4) or not np.all(o6 == 8.0):
        bad += 1
        print("rank %d: out_dtype=np.float32: %s %s" % (me, o6.dtype, o6.shape))
    try:
        w8a8.scaled_mm_reduce_scatter(comm, a[me], w[me].T, sa[me], sb[me], partials="bf16")
        bad += 1
        print("rank %d: partials='bf16' was accepted" % me)
    except w8a8.W8A8Error as e:
        if e.status != w8a8.Status.ERROR_INVALID_VALUE or "partials" not in str(e):
            bad += 1
            print("rank %d: partials='bf16': %s" % (me, e))
    # Block scales (fp8, DeepSeek-V3 style): the all-gather's rows are w8a8.scaled_mm_blockwise of the gathered rows,
    # bit for bit; the reduce-scatter is the rank-ordered fp32 sum of each K shard's block-scaled GEMM.
    rb = np.random.default_rng(4321)
    Mb, Nb, Kb = 11, 200, 300
    xq, sx = w8a8.quantize_fp8_groups(rb.standard_normal((Mb, Kb)).astype(np.float32))
    wq, sw = w8a8.quantize_fp8_blocks((rb.standard_normal((Nb, Kb)) * 0.05).astype(np.float32))
    offb, rowsb = w8a8.shard_rows(Mb, W, me)
    for overlap in (True, False):
        got = w8a8.all_gather_scaled_mm_blockwise(comm, xq[offb:offb + rowsb], wq.T, sx[offb:offb + rowsb], sw,
                                                  out_dtype="fp32", overlap=overlap, m_total=Mb)
        want = w8a8.scaled_mm_blockwise(xq, wq.T, sx, sw, out_dtype="fp32")
        if not np.array_equal(got.view(np.uint32), want.view(np.uint32)):
            bad += 1
            print("rank %d: block-scaled all-gather (overlap %s) differs from the single-rank GEMM" % (me, overlap))
    xs = rb.standard_normal((Mb, Kb)).astype(np.float32)
    ws = (rb.standard_normal((Nb, Kb)) * 0.05).astype(np.float32)
    shards = [w8a8.shard_rows(Kb, W, j) for j in range(W)]  # each rank's K shard, quantized on its own
    parts = []
    for k0, kn in shards:
        qa, sa_j = w8a8.quantize_fp8_groups(np.ascontiguousarray(xs[:, k0:k0 + kn]))
        qw, sw_j = w8a8.quantize_fp8_blocks(np.ascontiguousarray(ws[:, k0:k0 + kn]))
        parts.append((qa, qw, sa_j, sw_j))
    total = None
    for qa, qw, sa_j, sw_j in parts:
        pj = w8a8.scaled_mm_blockwise(qa, qw.T, sa_j, sw_j, out_dtype="fp32")
        total = pj if total is None else (total + pj).astype(np.float32)
    qa, qw, sa_j, sw_j = parts[me]
    got = w8a8.scaled_mm_reduce_scatter_blockwise(comm, qa, qw.T, sa_j, sw_j, out_dtype="fp32")
    if not np.array_equal(got.view(np.uint32), total[offb:offb + rowsb].view(np.uint32)):
        bad += 1
        print("rank %d: block-scaled reduce-scatter differs from the rank-ordered sum of the shards' GEMMs" % me)
    comm.close()
    print("rank %d of %d: %s" % (me, W, "ok" if bad == 0 else "%d failures" % bad))
    return 1 if bad else 0


@unittest.skipIf(np is None, "NumPy is not installed")
class ReduceScatterPartials(unittest.TestCase):
    def launch(self, argv):
        env = dict(os.environ)
        env[WORKER_ENV] = "1"
        env["PYTHONPATH"] = os.path.join(ROOT, "python") + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH")
                                                            else "")
        p = subprocess.run(argv + [sys.executable, os.path.abspath(__file__)], env=env, capture_output=True,
                           text=True, timeout=180)
        if p.returncode == SKIP_RC:
            self.skipTest(p.stdout.strip() or "libw8a8 has no MPI")
        self.assertEqual(p.returncode, 0, "workers failed:\n%s\n%s" % (p.stdout[-4000:], p.stderr[-4000:]))

    def test_w1(self):
        self.launch([])

    @unittest.skipIf(shutil.which("mpirun") is None, "no mpirun")
    def test_w2(self):
        self.launch(["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2"])


if __name__ == "__main__":
    if os.environ.get(WORKER_ENV):
        sys.exit(_worker())
    unittest.main()
