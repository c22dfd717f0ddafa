"""The ctypes mirror of include/w8a8.h is exact: a C program compiled against the header prints every
struct's size and field offsets and every enum value, and they must equal the Python side's."""
import ctypes
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "python"))

from w8a8 import _lib  # noqa: E402  (needs no NumPy)

HEADER = os.path.join(ROOT, "include", "w8a8.h")

STRUCTS = {
    "w8a8_matrix": (_lib.Matrix, ["dtype", "layout", "rows", "cols", "ld", "data"]),
    "w8a8_vector": (_lib.Vector, ["dtype", "len", "data"]),
    "w8a8_zero_point": (_lib.ZeroPoint, ["azp", "azp_adj"]),
    "w8a8_handle_info": (_lib.HandleInfo, ["kind", "device_index", "cc_major", "cc_minor", "num_sms", "num_threads",
                                           "workspace_bytes", "name", "features"]),
    "w8a8_unique_id": (_lib.UniqueId, ["internal"]),
    "w8a8_tp_options": (_lib.TpOptions, ["struct_size", "overlap", "reserved0", "partials"]),
    "w8a8_gathered": (_lib.Gathered, ["a", "scale_a", "azp"]),
}
# Structs that a header under concurrent edits may not have yet.
with open(HEADER) as _f:
    _HEADER_TEXT = _f.read()
for _s, _py, _fields in (("w8a8_launch_info", _lib.LaunchInfo, ["kernel", "config", "split_k", "m", "n", "k"]),
                         ("w8a8_setting", _lib.Setting, ["name", "value", "default_value", "doc", "for_users",
                                                         "is_set"])):
    if "typedef struct %s {" % _s in _HEADER_TEXT:
        STRUCTS[_s] = (_py, _fields)
ENUMS = {
    "W8A8_DTYPE_": _lib.DType, "W8A8_DEVICE_": _lib.DeviceKind, "W8A8_KERNEL_": _lib.Kernel,
    "W8A8_QUANT_": _lib.QuantMode,
}


@unittest.skipIf(shutil.which(os.environ.get("CC", "cc")) is None, "no C compiler")
class HeaderMirror(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        lines = ['#include <stdio.h>', '#include <stddef.h>', '#include "w8a8.h"', "int main(void) {"]
        for s, (_, fields) in STRUCTS.items():
            lines.append('printf("size %s %%zu\\n", sizeof(%s));' % (s, s))
            for f in fields:
                lines.append('printf("off %s.%s %%zu\\n", offsetof(%s, %s));' % (s, f, s, f))
        with open(HEADER) as f:
            header = f.read()
        names = []
        for prefix, en in ENUMS.items():
            for m in en:
                names.append(prefix + m.name)
        for m in _lib.Layout:
            names.append("W8A8_" + m.name)
        for m in _lib.Status:
            names.append("W8A8_" + m.name)
        # Python may know statuses that a header under concurrent edits lacks (see test_enums).
        names = [n for n in names if re.search(r"\b%s\b" % n, header)]
        for n in names:
            lines.append('printf("enum %s %%d\\n", (int)%s);' % (n, n))
        lines.append('printf("enum W8A8_STATUS_COUNT %d\\n", (int)W8A8_STATUS_COUNT);')
        lines.append('printf("macro W8A8_UNIQUE_ID_BYTES %d\\n", W8A8_UNIQUE_ID_BYTES);')
        lines.append('printf("macro W8A8_VERSION %d\\n", W8A8_VERSION);')
        for name in _lib.TP_PARTIALS:
            macro = "W8A8_TP_PARTIALS_" + name.upper()
            lines.append('printf("macro %s %%d\\n", %s);' % (macro, macro))
        # W8A8_TP_OPTIONS_INIT, as the C side initialises it
        lines.append('{ w8a8_tp_options o = W8A8_TP_OPTIONS_INIT; printf("init tp_options.struct_size %zu\\n", '
                     'o.struct_size); printf("init tp_options.overlap %d\\n", o.overlap); '
                     'printf("init tp_options.partials %d\\n", o.partials); }')
        lines.append("return 0; }")
        cls.tmp = tempfile.mkdtemp(prefix="w8a8-bind-")
        src, exe = os.path.join(cls.tmp, "m.c"), os.path.join(cls.tmp, "m")
        with open(src, "w") as f:
            f.write("\n".join(lines) + "\n")
        subprocess.run([os.environ.get("CC", "cc"), "-std=c11", "-I" + os.path.join(ROOT, "include"), src, "-o", exe],
                       check=True, capture_output=True, timeout=120)
        out = subprocess.run([exe], check=True, capture_output=True, text=True, timeout=60).stdout
        cls.c = {}
        for line in out.splitlines():
            kind, key, val = line.split()
            cls.c[(kind, key)] = int(val)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_structs(self):
        for s, (py, fields) in STRUCTS.items():
            self.assertEqual(ctypes.sizeof(py), self.c[("size", s)], s)
            for f in fields:
                self.assertEqual(getattr(py, f).offset, self.c[("off", "%s.%s" % (s, f))], "%s.%s" % (s, f))
            self.assertEqual([f[0] for f in py._fields_], fields, s)

    def test_enums(self):
        for prefix, en in ENUMS.items():
            for m in en:
                self.assertEqual(int(m), self.c[("enum", prefix + m.name)], prefix + m.name)
        for m in list(_lib.Layout):
            self.assertEqual(int(m), self.c[("enum", "W8A8_" + m.name)], m.name)
        # Every header status is mirrored with its value; a status the Python side has beyond the
        # header's count (an addition being landed in parallel) must not collide with one.
        count = self.c[("enum", "W8A8_STATUS_COUNT")]
        for m in _lib.Status:
            if int(m) < count:
                self.assertEqual(int(m), self.c[("enum", "W8A8_" + m.name)], m.name)
        self.assertGreaterEqual(len(_lib.Status), count)
        self.assertEqual(_lib.UNIQUE_ID_BYTES, self.c[("macro", "W8A8_UNIQUE_ID_BYTES")])
        for name, value in _lib.TP_PARTIALS.items():
            self.assertEqual(value, self.c[("macro", "W8A8_TP_PARTIALS_" + name.upper())], name)
        o = _lib.tp_options()  # the defaults: W8A8_TP_OPTIONS_INIT
        for f in ("struct_size", "overlap", "partials"):
            self.assertEqual(getattr(o, f), self.c[("init", "tp_options." + f)], f)
        self.assertEqual(_lib.tp_options(False, "out").partials, _lib.TP_PARTIALS["out"])
        with self.assertRaises(_lib.W8A8Error):
            _lib.tp_options(True, "bf16")
        v = self.c[("macro", "W8A8_VERSION")]
        self.assertEqual(_lib.HEADER_VERSION, (v // 10000, v // 100 % 100, v % 100))

    def test_every_enum_member_is_mirrored(self):
        """Names in the header's enums that the Python side lacks (a member added to the header)."""
        with open(HEADER) as f:
            text = f.read()
        statuses = set(re.findall(r"X\((W8A8_\w+), \d+,", text))
        self.assertLessEqual(statuses, {"W8A8_" + m.name for m in _lib.Status})
        for prefix, en in ENUMS.items():
            members = set(re.findall(r"\b(%s\w+) = \d+" % prefix, text))
            self.assertEqual(members, {prefix + m.name for m in en}, prefix)

    def test_every_exported_function_is_declared(self):
        with open(HEADER) as f:
            text = f.read()
        fns = set(re.findall(r"W8A8_API\s+[\w\s\*]+?\b(w8a8_\w+)\s*\(", text))
        lib = _lib.load()
        for fn in sorted(fns):
            if not hasattr(lib, fn):
                # The loaded library was built from an older tree (CI builds both from one tree).
                self.assertIn(fn, _lib.OPTIONAL_FUNCTIONS, "%s is in the header but neither in the loaded "
                              "library nor among _lib.OPTIONAL_FUNCTIONS" % fn)
                continue
            self.assertIsNotNone(getattr(lib, fn).argtypes, "%s has no prototype in _lib.py" % fn)


if __name__ == "__main__":
    unittest.main()
