#!/bin/bash
# oldab.sh — step "oldab" of scripts/device_session.sh: the kernels of an older source tree against
# this one's, interleaved in one call (old, new, old, new), through bench/sm90_dev: the check that a
# change did not slow what it did not mean to touch (session 7 found a 5% fp8 loss from dead code).
# The old tree is .dev/old (ignored; carry it): `git archive REF src include Makefile bench/sm90_dev.c
# | tar -x -C .dev/old`. Its library is built in .dev/old/build-x (start
# `(cd .dev/old && make BUILD=build-x CUDA_ARCHS=90a -j8 lib) &` before device_session to overlap
# the build with the other steps; this step waits for it or builds it). OLDAB_RUNS: ';'-separated
# sm90_dev argument lists; each goes to oldab-<old tree's directory name>-runN.txt, the four passes one
# after another. OLDAB_DIR: another old tree than .dev/old (two baselines in one call: carry both and run
# device_session twice, each with its own OUT and OLDAB_DIR; give the trees different directory names).
# Env from device_session.sh: L, BUILD, LEFT_S. Last line: summary.
set -u
: "${L:?}" "${BUILD:?}"
LEFT_S=${LEFT_S:-300}
. "$(dirname "$0")/common.sh"
RUNS=${OLDAB_RUNS:-"-d fp8 -s 70b-qkv,8b-down,8b-o -m 256,2048,8192;-d int8 -s 70b-qkv,8b-down,8b-o -m 256,2048,8192"}
O=${OLDAB_DIR:-.dev/old}
[ -d "$O/src" ] || { echo "oldab: no $O tree (carry it)"; exit 1; }
OLDLIB=$O/build-x/lib/libw8a8.a
w=0
while pgrep -f "BUILD=build-x" >/dev/null && [ "$w" -lt "$(cap 150)" ]; do  # the background build
  sleep 1
  w=$((w + 1))
done
[ -f "$OLDLIB" ] || (cd "$O" && timeout -k 5 "$(cap 150)" make BUILD=build-x CUDA_ARCHS=90a -j"$(nproc)" lib) \
  >"$L/oldab-oldbuild.txt" 2>&1
need_sm90_dev oldab
OLD=$O/build-x/sm90_dev
(cd "$O" && build_sm90_dev build-x/lib/libw8a8.a build-x/sm90_dev) >>"$L/oldab-build.txt" 2>&1 ||
  { echo "oldab: the old tree's sm90_dev did not build (oldab-build.txt)"; exit 1; }
i=0
IFS=';' read -r -a runs <<<"$RUNS"
for r in "${runs[@]}"; do
  i=$((i + 1))
  f="$L/oldab-$(basename "$O")-run$i.txt"
  : >"$f"
  for pass in old new old new; do
    echo "# pass $pass: sm90_dev $r" >>"$f"
    d="$DEV"
    [ "$pass" = old ] && d="$OLD"
    timeout -k 5 "$(cap 90)" "$d" $r >>"$f" 2>&1
  done
done
echo "oldab: $i runs x 4 passes (old, new, old, new) (logs/oldab-*.txt)"
