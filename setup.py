"""The build step of the w8a8 wheel (the metadata is in pyproject.toml).

build_py runs `make lib` in the repository, then copies $(BUILD)/lib/libw8a8.so into the package, where
w8a8/_lib.py looks first. The Makefile reads its knobs from the environment as usual: NO_CUDA=1,
CUDA_ARCHS="90a", NO_MPI=1, CUDA_HOME, BUILD (default build); W8A8_JOBS sets make's -j (default: every
core). The wheel is tagged py3-none-<platform>: it holds no Python extension (ctypes loads the library),
so any Python 3 on this platform can use it.
"""
import os
import shutil
import subprocess

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

try:  # setuptools >= 70.1 has bdist_wheel; older ones take it from the wheel package
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:
    try:
        from wheel.bdist_wheel import bdist_wheel
    except ImportError:
        bdist_wheel = None

ROOT = os.path.dirname(os.path.abspath(__file__))
BUILD = os.environ.get("BUILD", "build")
# setuptools' own build tree, inside the Makefile's build directory (git ignores it) but apart from
# its lib/, which setuptools would otherwise share.
PY_BUILD = os.path.join(ROOT, BUILD, "python")


class build_py_with_library(build_py):
    def run(self):
        super().run()
        jobs = os.environ.get("W8A8_JOBS") or str(os.cpu_count() or 1)
        cmd = ["make", "-C", ROOT, "-j" + jobs, "BUILD=" + BUILD, "lib"]
        print("w8a8: " + " ".join(cmd), flush=True)
        subprocess.check_call(cmd)
        # Copied every time (not only when newer): a library made with other settings may be older.
        dst = os.path.join(self.build_lib, "w8a8", "libw8a8.so")
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        shutil.copy2(os.path.join(ROOT, BUILD, "lib", "libw8a8.so"), dst)


cmdclass = {"build_py": build_py_with_library}


class BinaryDistribution(Distribution):
    def has_ext_modules(self):
        return True  # the library is machine code: a platform wheel, installed into platlib


if bdist_wheel is not None:
    class bdist_wheel_platform(bdist_wheel):
        def get_tag(self):
            return ("py3", "none", super().get_tag()[2])

    cmdclass["bdist_wheel"] = bdist_wheel_platform

os.makedirs(PY_BUILD, exist_ok=True)
setup(cmdclass=cmdclass, distclass=BinaryDistribution,
      options={"build": {"build_base": PY_BUILD}, "egg_info": {"egg_base": PY_BUILD}})
