"""bench/host_cost.py runs end to end (few iterations; its numbers are not checked here): every timed
wrapper's output equals the raw ctypes call's before it is timed (the script exits non-zero otherwise),
and the table and the JSON rows name each path."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SCRIPT = os.path.join(ROOT, "bench", "host_cost.py")

try:
    import numpy  # noqa: F401
except ImportError:  # pragma: no cover
    numpy = None


@unittest.skipIf(numpy is None, "NumPy is not installed")
class HostCostScript(unittest.TestCase):
    def test_runs(self):
        with tempfile.TemporaryDirectory() as d:
            js = os.path.join(d, "h.json")
            p = subprocess.run([sys.executable, SCRIPT, "--iters", "50", "--repeat", "1", "--skip-torch", "--json", js],
                               capture_output=True, text=True, timeout=300)
            self.assertEqual(p.returncode, 0, p.stdout[-3000:] + p.stderr[-3000:])
            with open(js) as f:
                rep = json.load(f)
        names = [r[0] for r in rep["numpy"]["rows"]]
        self.assertEqual(names[0], "raw ctypes (structs built once, byref)")
        for want in ("w8a8.scaled_mm(out=)", "w8a8.scaled_mm (allocates out)", "w8a8.numpy.scaled_mm(out=)"):
            self.assertIn(want, names)
        self.assertTrue(all(r[1] > 0 for r in rep["numpy"]["rows"]))
        self.assertIn("| raw ctypes (structs built once, byref) |", p.stdout)


if __name__ == "__main__":
    unittest.main()
