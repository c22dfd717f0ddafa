#!/bin/bash
# tpgroup.sh — step "tpgroup" (issue 6; session 9's candidate, NOT yet run): the fused all-gather + GEMM
# with its tile order's groups cut to the own rows' X tiles (sm90_args.group, read only by kernels built
# with -DW8A8_SM90_RUNTIME_GROUP; NOTES, TP session 9: at 1024 tokens and TP = 2 every group of 8 token
# tiles mixed own and peer rows, and the fused op took the unfused time).
#   1. build-alt: the library, tests and CLI with -DW8A8_SM90_RUNTIME_GROUP (~60 s; in build-alt, so
#      that sm90ab's SM90AB_ALT_RUNS in a later step of the same call time its GEMMs against the
#      default build: the run-time divisor changes every kernel's code);
#   2. its tp_gpu tests (their M = 520 cases cut the group to 1 or 2; the mapping's bijection for every
#      group 1..8 and rotation was checked exhaustively in a model, session 9);
#   3. with 2+ GPUs only (ranks sharing a GPU copy every chunk before the launch: nothing to overlap),
#      tp-bench --local NGPU at 1024 and 2048 tokens, in turn: the default build, build-alt with
#      W8A8_SM90_TP_GROUP=1 (the cut groups), build-alt with W8A8_SM90_TP_GROUP=0 (the same kernels,
#      groups of 8: the order alone); two rounds, the second in reverse order.
# Env from device_session.sh: L, BUILD, LEFT_S, NGPU. Last line: summary.
set -u
: "${L:?}" "${BUILD:?}"
LEFT_S=${LEFT_S:-300}
. "$(dirname "$0")/common.sh"
ALT=build-alt
rm -rf "$ALT"  # make does not track NVCCEXTRA: objects of another alt build would pass as up to date
if ! timeout -k 5 "$(cap 200)" make BUILD=$ALT CUDA_ARCHS=90a NVCCEXTRA=-DW8A8_SM90_RUNTIME_GROUP -j"$(nproc)" lib tests cli \
  >"$L/tpgroup-build.txt" 2>&1; then
  echo "tpgroup: build-alt did not build (tpgroup-build.txt)"
  exit 1
fi
W8A8_TEST_VERBOSE=1 timeout -k 5 "$(cap 200)" "$ALT/bin/w8a8_tests" tp_gpu >"$L/tpgroup-tests.txt" 2>&1
res="tests [exit $? $(grep -E '^[0-9]+ passed' "$L/tpgroup-tests.txt" | tail -n 1)]"
W=${NGPU:-1}
if [ "$W" -lt 2 ]; then
  echo "tpgroup:$res tp-bench skipped ($W GPU)"
  exit 0
fi
for round in 1 2; do
  sides="default grp1 grp0"
  [ $round = 2 ] && sides="grp0 grp1 default"
  for side in $sides; do
    bin="$BUILD/bin/w8a8" v=1
    [ $side != default ] && bin="$ALT/bin/w8a8"
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
