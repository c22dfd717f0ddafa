#!/bin/sh
# run_python.sh — the Python package's tests (tests/python) with plain unittest; ends with
# "N passed, N failed" for tests/run_all.sh. Needs python3 with NumPy (Debian's python3-numpy: the
# pyenv or venv python3 first in PATH may lack it, so each candidate interpreter is probed).
# The torch tests skip themselves where torch or CUDA is absent.
# Env: BUILD (build dir, default build), PYTHON (an interpreter to use).
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.." || exit 1
export W8A8_LIBRARY=${W8A8_LIBRARY:-$PWD/$BUILD/lib/libw8a8.so}
py=""
for cand in ${PYTHON:-} python3 /usr/bin/python3; do
  if command -v "$cand" >/dev/null 2>&1 && "$cand" -c "import numpy" >/dev/null 2>&1; then
    py=$cand
    break
  fi
done
if [ -z "$py" ]; then
  echo "run_python: no python3 with NumPy (install python3-numpy)"
  echo "0 passed, 1 failed"
  exit 1
fi
if [ ! -f "$W8A8_LIBRARY" ]; then
  echo "run_python: $W8A8_LIBRARY is missing (make BUILD=$BUILD)"
  echo "0 passed, 1 failed"
  exit 1
fi
echo "run_python: $py ($("$py" -c 'import sys, numpy; print(sys.version.split()[0], "numpy", numpy.__version__)')), $W8A8_LIBRARY"
# unittest's summary is "Ran N tests" + "OK (skipped=S)" or "FAILED (failures=F, errors=E, skipped=S)".
log=$(mktemp)
PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}" "$py" -m unittest discover -s tests/python -t tests/python -v >"$log" 2>&1
rc=$?
grep -E '(ok|FAIL|ERROR|skipped.*)$' "$log" | grep -E ' \.\.\. ' | sed -n '1,400p'
if [ $rc -ne 0 ]; then sed -n '/^=====/,$p' "$log" | tail -n 80; fi
ran=$(sed -nE 's/^Ran ([0-9]+) tests? in.*/\1/p' "$log" | tail -n 1)
fails=$(sed -nE 's/^FAILED \((.*)\)$/\1/p' "$log" | tail -n 1)
skipped=$(grep -oE 'skipped=[0-9]+' "$log" | tail -n 1 | cut -d= -f2)
f=$(echo "$fails" | grep -oE 'failures=[0-9]+' | cut -d= -f2)
e=$(echo "$fails" | grep -oE 'errors=[0-9]+' | cut -d= -f2)
ran=${ran:-0}; f=${f:-0}; e=${e:-0}; skipped=${skipped:-0}
failed=$((f + e))
if [ "$ran" -eq 0 ] || { [ $rc -ne 0 ] && [ $failed -eq 0 ]; }; then failed=$((failed + 1)); fi
rm -f "$log"
echo "$((ran - f - e - skipped)) passed, $failed failed, $skipped skipped"
[ $failed -eq 0 ]
