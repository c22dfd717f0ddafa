#!/bin/sh
# run_all.sh — everything `make test` runs (CPU and MPI; CI has no GPU).
# Each stage prints its own "N passed, N failed" line, with ", N skipped" where it skipped tests; the last
# line here sums them: "N passed, N failed, N skipped" (CI greps its "N passed, N failed" prefix). A test
# skipped is not a test passed: the skipped count says how much of the suite this machine did not run.
# Env: BUILD (build dir, default build), FUZZ_SECONDS (default 60), MPI_NPS (default "1 2 3 4").
BUILD=${BUILD:-build}
FUZZ_SECONDS=${FUZZ_SECONDS:-60}
MPI_NPS=${MPI_NPS:-"1 2 3 4"}
total_pass=0
total_fail=0
total_skip=0
stages_not_run=""
log=$(mktemp)
. "$(dirname "$0")/cli/tally.sh"

# Add up a stage's summary line.
tally() { # name, exit code, log file
  if ! counts=$(summary_of "$3"); then
    echo "== $1: no summary line (exit $2): counted as 1 failure"
    total_fail=$((total_fail + 1))
    return
  fi
  set -- "$1" "$2" $counts
  p=$3 f=$4 s=$5
  if [ "$2" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
  echo "== $1: $p passed, $f failed, $s skipped"
  total_pass=$((total_pass + p))
  total_fail=$((total_fail + f))
  total_skip=$((total_skip + s))
}

stage() { # name, command...
  name=$1
  shift
  echo "== $name: $*"
  "$@" >"$log" 2>&1
  rc=$?
  grep -vE '^\[ (RUN|  OK) *\]' "$log" | tail -n 40
  tally "$name" $rc "$log"
}

stage unit "$BUILD/bin/w8a8_tests"
# The project's text and commit messages (tests/check_words.sh).
stage words sh tests/check_words.sh
# The scalar fallback paths, as on a CPU without AVX2.
stage unit-noavx env W8A8_CPU_DISABLE=avx2,avx512 "$BUILD/bin/w8a8_tests" cpu_ ref_ quant_ gemm_

if [ -x "$BUILD/bin/w8a8_tp_tests" ]; then
  MPIRUN="mpirun --allow-run-as-root --oversubscribe"
  for np in $MPI_NPS; do
    stage "mpi-np$np" timeout 300 $MPIRUN -np "$np" "$BUILD/bin/w8a8_tp_tests"
  done
  # a rank dying mid-sequence (mpirun --enable-recovery keeps the survivors; each run is bounded by a timeout)
  stage mpi-kill timeout 300 sh tests/mpi/run_kill.sh "$BUILD/bin/w8a8_tp_tests"
fi

# A stage whose binary is missing is skipped (and named at the end), unless W8A8_REQUIRE_ALL is set (CI
# sets it): then it counts as a failure, so CI cannot pass by not building something.
missing() { # name, what
  if [ -n "$W8A8_REQUIRE_ALL" ]; then
    echo "== $1: $2 is missing: counted as 1 failure"
    total_fail=$((total_fail + 1))
  else
    echo "== $1: skipped ($2 is missing)"
    stages_not_run="$stages_not_run, $1"
  fi
}

if [ -x "$BUILD-asan/bin/w8a8_tests" ]; then
  stage asan-ubsan env ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    "$BUILD-asan/bin/w8a8_tests"
else
  missing asan-ubsan "$BUILD-asan/bin/w8a8_tests (make asan)"
fi

if [ -x "$BUILD/bin/fuzz_validate" ] && [ "$FUZZ_SECONDS" -gt 0 ]; then
  stage fuzz sh tests/run_fuzz.sh "$BUILD/bin/fuzz_validate" "$FUZZ_SECONDS"
elif [ "$FUZZ_SECONDS" -gt 0 ]; then
  missing fuzz "$BUILD/bin/fuzz_validate (make fuzz; needs clang)"
fi
# the tuning-table parser (tests/fuzz_tune.c): a third of the validation layer's time, at least 10 s
if [ -x "$BUILD/bin/fuzz_tune" ] && [ "$FUZZ_SECONDS" -gt 0 ]; then
  tune_s=$((FUZZ_SECONDS / 3))
  [ "$tune_s" -lt 10 ] && tune_s=10
  stage fuzz-tune sh tests/run_fuzz.sh "$BUILD/bin/fuzz_tune" "$tune_s"
elif [ "$FUZZ_SECONDS" -gt 0 ]; then
  missing fuzz-tune "$BUILD/bin/fuzz_tune (make fuzz; needs clang)"
fi

# make install into a temporary prefix, then build examples/example.c outside the tree
# with nothing but pkg-config, and run it.
install_example() {
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/w8a8-install.XXXXXX")
  ok=0
  if make --no-print-directory -s install BUILD="$BUILD" PREFIX="$tmp/prefix" &&
    mkdir "$tmp/example" && cp examples/example.c "$tmp/example/" &&
    export PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig" &&
    flags=$(pkg-config --cflags --libs w8a8) &&
    echo "pkg-config --cflags --libs w8a8: $flags" &&
    (cd "$tmp/example" && ${CC:-cc} -std=c11 -Wall -Wextra -Werror example.c $flags -lm -o example && ./example) &&
    "$tmp/prefix/bin/w8a8" version; then
    ok=1
  fi
  rm -rf "$tmp"
  if [ $ok = 1 ]; then echo "1 passed, 0 failed"; else echo "0 passed, 1 failed"; return 1; fi
}
if [ -f "$BUILD/lib/libw8a8.so" ] && command -v pkg-config >/dev/null 2>&1; then
  stage install-example install_example
else
  missing install-example "$BUILD/lib/libw8a8.so or pkg-config"
fi

# The README's Install commands as a new user runs them, offline and outside the tree: the Python package
# (pip with --no-build-isolation, in fresh venvs) running a NumPy scaled_mm on the library inside it, and
# examples/example.c built against a `make install` prefix with CMake (find_package) and with pkg-config.
# pip's build step runs `make lib`, which finds the library up to date after `make`.
packaging() ( # a subshell: its variables, `cd`s and the venv's activation stay here
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/w8a8-packaging.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  root=$PWD
  pass=0
  fail=0
  part() { # name, command...: one counted check, run in a subshell from the repository root
    what=$1
    shift
    if (cd "$root" && "$@") >"$tmp/part.log" 2>&1; then
      pass=$((pass + 1)); tail -n 2 "$tmp/part.log"; echo "packaging: $what ok"
    else
      fail=$((fail + 1)); tail -n 30 "$tmp/part.log"; echo "packaging: $what FAILED"
    fi
  }
  # From outside the tree: the venv's w8a8 on the library inside it, and the README's NumPy call.
  cat >"$tmp/check.py" <<'PY'
import os, sys
import numpy as np
import w8a8
pkg = os.path.dirname(os.path.abspath(w8a8.__file__))
assert pkg.startswith(sys.prefix), "w8a8 imported from %s, not from the venv %s" % (pkg, sys.prefix)
assert w8a8.library_path() == os.path.join(pkg, "libw8a8.so"), "loaded %s" % w8a8.library_path()
a, w = np.random.randint(-128, 128, (16, 256), dtype=np.int8), np.random.randint(-128, 128, (32, 256), dtype=np.int8)
y = w8a8.scaled_mm(a, w.T, np.full((16, 1), 0.01, np.float32), np.full((1, 32), 0.02, np.float32), out_dtype="fp32")
ref = (a.astype(np.int64) @ w.T.astype(np.int64)) * (0.01 * 0.02)
assert np.allclose(y, ref, rtol=1e-5, atol=1e-3), np.abs(y - ref).max()
print("w8a8 %s, %s: scaled_mm ok" % (w8a8.version_string(), w8a8.library_path()))
PY
  # In a fresh venv: `pip install .`, then a wheel installed into a second fresh venv.
  python_wheel() {
    unset W8A8_LIBRARY PYTHONPATH
    export PIP_DISABLE_PIP_VERSION_CHECK=1 BUILD
    "$PACK_PY" -m venv --system-site-packages "$tmp/venv" && . "$tmp/venv/bin/activate" &&
      pip install --no-build-isolation . &&
      (cd "$tmp" && python "$tmp/check.py") &&
      pip wheel --no-build-isolation --no-deps -w "$tmp/dist" . &&
      ls "$tmp"/dist/w8a8-*-py3-none-linux_*.whl && deactivate &&
      "$PACK_PY" -m venv --system-site-packages "$tmp/venv2" && . "$tmp/venv2/bin/activate" &&
      pip install "$tmp"/dist/w8a8-*.whl &&
      (cd "$tmp" && python "$tmp/check.py")
  }
  cmake_example() {
    cmake -S examples -B "$tmp/build-example" -DCMAKE_PREFIX_PATH="$tmp/prefix" &&
      cmake --build "$tmp/build-example" && "$tmp/build-example/example"
  }
  pkgconfig_example() {
    export PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig"
    mkdir "$tmp/pc" && cp examples/example.c "$tmp/pc/" && cd "$tmp/pc" &&
      cc -std=c11 example.c $(pkg-config --cflags --libs w8a8) -o example && ./example
  }
  part python-wheel python_wheel
  if make --no-print-directory -s install BUILD="$BUILD" PREFIX="$tmp/prefix" >"$tmp/install.log" 2>&1; then
    part cmake-example cmake_example
    part pkgconfig-example pkgconfig_example
  else
    tail -n 30 "$tmp/install.log"; echo "packaging: make install FAILED"; fail=$((fail + 1))
  fi
  echo "$pass passed, $fail failed"
  [ "$fail" -eq 0 ]
)
# A python3 that can build and run the wheel offline: venv (ensurepip), setuptools, wheel, NumPy.
PACK_PY=""
for cand in ${PYTHON:-} python3 /usr/bin/python3; do
  if command -v "$cand" >/dev/null 2>&1 &&
    "$cand" -c "import ensurepip, venv, setuptools, wheel, numpy" >/dev/null 2>&1; then
    PACK_PY=$cand
    break
  fi
done
pack_missing=""
[ -f "$BUILD/lib/libw8a8.so" ] || pack_missing="$pack_missing, $BUILD/lib/libw8a8.so"
command -v cmake >/dev/null 2>&1 || pack_missing="$pack_missing, cmake"
command -v pkg-config >/dev/null 2>&1 || pack_missing="$pack_missing, pkg-config"
[ -n "$PACK_PY" ] ||
  pack_missing="$pack_missing, a python3 with venv, setuptools, wheel and NumPy (python3-venv python3-setuptools python3-wheel python3-numpy)"
if [ -z "$pack_missing" ]; then
  stage packaging packaging
else
  missing packaging "${pack_missing#, }"
fi

# The CUDA code built for an architecture list without sm_90a (the Hopper kernels compiled out, their
# entry points refusing at run time): keeps the guards around what only sm_90a uses honest, since a
# variable used only there breaks such a build under -Werror.
no90a() {
  make -s BUILD="$BUILD-no90a" CUDA_ARCHS=80 -j"$(nproc 2>/dev/null || echo 2)" lib && echo "1 passed, 0 failed"
}
if command -v nvcc >/dev/null 2>&1 || [ -x "${CUDA_HOME:-/usr/local/cuda}/bin/nvcc" ]; then
  stage cuda-no90a no90a
fi

if [ -x "$BUILD/bin/w8a8" ]; then
  stage cli-check sh -c "'$BUILD/bin/w8a8' check --cpu && echo '1 passed, 0 failed'"
  stage cli-args sh tests/run_cli_args.sh "$BUILD/bin/w8a8"
else
  missing cli "$BUILD/bin/w8a8"
fi
# this script's own reading of the stages' summary lines (tests/cli/tally.sh)
stage tally sh tests/cli/test_tally.sh "$BUILD/bin/w8a8_tests"

# The Python package (python/) on NumPy through the shared library; torch tests skip without torch.
if [ -f "$BUILD/lib/libw8a8.so" ]; then
  stage python env BUILD="$BUILD" sh tests/run_python.sh
else
  missing python "$BUILD/lib/libw8a8.so"
fi

rm -f "$log"
[ -n "$stages_not_run" ] && echo "stages not run: ${stages_not_run#, }"
echo "$total_pass passed, $total_fail failed, $total_skip skipped"
[ "$total_fail" -eq 0 ]
