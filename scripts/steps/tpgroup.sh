#!/bin/bash
# tpgroup.sh — step "tpgroup" (issue 6): the fused all-gather + GEMM with its tile order's groups cut to
# the own rows' X tiles (sm90_args.group; the default since session 10) against groups of 8.
#   1. build-alt: the library, tests and CLI with -DW8A8_SM90_CONST_GROUP (~60 s; in build-alt, so
#      that sm90ab's SM90AB_ALT_RUNS in a later step of the same call time the GEMMs of the default
#      build, whose kernels divide by a run-time group, against the constant divisor);
#   2. the default build's tp_gpu tests (their M = 520 cases cut the group to 1 or 2);
#   3. with 2+ GPUs only (ranks sharing a GPU copy every chunk before the launch: nothing to overlap),
#      tp-bench --local NGPU at 1024 and 2048 tokens, in turn: build-alt (constant groups of 8), the
#      default build with W8A8_SM90_TP_GROUP=1 (the cut groups) and with W8A8_SM90_TP_GROUP=0 (the
#      run-time divisor, groups of 8: the kernels' code alone); two rounds, the second in reverse order.
# Session 10 (the first run, then with the roles of the builds swapped): cut groups 1.06-1.10x at 1024.
# Env from device_session.sh: L, BUILD, LEFT_S, NGPU. Last line: summary.
set -u
: "${L:?}" "${BUILD:?}"
LEFT_S=${LEFT_S:-300}
. "$(dirname "$0")/common.sh"
ALT=build-alt
rm -rf "$ALT"  # make does not track NVCCEXTRA: objects of another alt build would pass as up to date
if ! timeout -k 5 "$(cap 200)" make BUILD=$ALT CUDA_ARCHS=90a NVCCEXTRA=-DW8A8_SM90_CONST_GROUP -j"$(nproc)" lib tests cli \
  >"$L/tpgroup-build.txt" 2>&1; then
  echo "tpgroup: build-alt did not build (tpgroup-build.txt)"
  exit 1
fi
tp_tests tpgroup 200 tp_gpu
for round in 1 2; do
  sides="const grp1 grp0"
  [ $round = 2 ] && sides="grp0 grp1 const"
  for side in $sides; do
    bin="$BUILD/bin/w8a8" v=1
    [ $side = const ] && bin="$ALT/bin/w8a8"
    [ $side = grp0 ] && v=0
    W8A8_SM90_TP_GROUP=$v timeout -k 5 "$(cap 90)" "$bin" tp-bench --local "$W" -m 1024,2048 -n 18 -w 2 \
      -o "$L/tpgroup-$side-r$round.jsonl" >"$L/tpgroup-$side-r$round.txt" 2>&1
    res="$res $side-r$round: exit $?;"
  done
done
# fused_us per row, side by side (the last column of tp-bench's table before the overlap)
for f in "$L"/tpgroup-*-r[12].txt; do
  echo "== $(basename "$f")"
  grep -E '^[0-9a-z_-]+ +(ag|rs) ' "$f"
done >"$L/tpgroup-fused.txt" 2>&1
echo "tpgroup:$res"
