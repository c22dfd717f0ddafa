"""bench/torch_compare.py's bookkeeping, in its --dry-run mode (fake timings, no GPU): the JSON
lines carry the `w8a8 bench -o` fields, every (impl, shape, M) that applies is there once, and the
markdown has the table and the targets."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SCRIPT = os.path.join(ROOT, "bench", "torch_compare.py")
FIELDS = ["impl", "op", "dtype", "scales", "out_dtype", "shape", "M", "N", "K", "us", "tflops", "gbps",
          "vs_baseline", "baseline", "wrong", "device", "date", "datetime", "host", "iters", "warmup", "rotate",
          "version"]


class TorchCompareDryRun(unittest.TestCase):
    def test_dry_run(self):
        with tempfile.TemporaryDirectory() as d:
            prefix = os.path.join(d, "x")
            p = subprocess.run([sys.executable, SCRIPT, "--dry-run", "--suites", "llama8b", "--m", "1,64", "-o",
                                prefix], capture_output=True, text=True, timeout=120)
            self.assertEqual(p.returncode, 0, p.stderr)
            with open(prefix + ".jsonl") as f:
                rows = [json.loads(line) for line in f]
            with open(prefix + ".md") as f:
                md = f.read()
        # 4 shapes x 2 M x 10 impls (ours with the weights-constant hint included: M <= 256; the read floor and
        # the two eager ones at M <= 64), less torch._int_mm at M = 1
        self.assertEqual(len(rows), 4 * 2 * 10 - 4)
        keys = set()
        for r in rows:
            for k in FIELDS:
                self.assertIn(k, r)
            keys.add((r["impl"], r["dtype"], r["shape"], r["M"]))
        self.assertEqual(len(keys), len(rows))
        impls = {r["impl"] for r in rows}
        self.assertEqual(impls, {"w8a8_cuda", "w8a8_cuda_weights_constant", "torch_scaled_mm_rowwise",
                                 "torch_scaled_mm_tensorwise", "torch_int_mm", "torch_mm_bf16", "read_weights",
                                 "w8a8_cuda_eager", "torch_scaled_mm_rowwise_eager"})
        floor = [r for r in rows if r["impl"] == "read_weights"]
        self.assertTrue(all(r["op"] == "read" and r["M"] <= 64 and r["gbps"] > 0 for r in floor))
        self.assertIn("a pure read of the weight bytes", md)
        ours = [r for r in rows if r["impl"] == "w8a8_cuda" and r["dtype"] == "fp8_e4m3"]
        self.assertTrue(all(r["baseline"] == "torch_scaled_mm_rowwise" and r["vs_baseline"] > 0 for r in ours))
        self.assertIn("## Summary against the targets", md)
        self.assertIn("| 8b-gateup | 64 |", md)
        self.assertIn("FAKE", md)
        self.assertIn("weights-constant hint", md)
        self.assertIn("## Eager calls (no graph)", md)
        eager = [r for r in rows if r["impl"] == "w8a8_cuda_eager"]
        self.assertTrue(all(r["baseline"] == "torch_scaled_mm_rowwise_eager" for r in eager))


if __name__ == "__main__":
    unittest.main()
