#!/bin/bash
# sm90_session.sh — one device-machine session for the Hopper fast path (issue 4), ~8 minutes:
#   1. build with epilogue v2 (the default since session 4; -DW8A8_SM90_EPILOGUE_V2 is a no-op now)
#      + a second library with v1 (-DW8A8_SM90_EPILOGUE_V1) for A/B
#   2. disassembly check (QGMMA/IGMMA, no LDL/STL) of both
#   3. the wide-N small-M cases of the 2026-11-29 stall (sm90wide_*), EACH in its own process
#      under `timeout`, first: a hang costs one case, not the session
#   4. the sm90 + tuning test suites (v2 build; v1 build too if v2 fails)
#   5. A/B timing of epilogue v1 vs v2 (bench/sm90_dev, heuristic plans) on the shapes and
#      M that matter (swap-AB M <= 64, the 128 x 128 / 128 x 256 tiles at large M)
#   6. `w8a8 tune` on both suites, then the dev bench again with the table loaded
#   7. the whole-library bench that stalled (8b-gateup M = 1), split 1 allowed
# Logs: $OUT (default ./sm90-out), at most 8 files (the device tool returns no more):
#   summary.txt build.txt tests.txt bench.txt tune.txt tune-log.txt auto-bench.txt
# Usage: OUT=/path bash scripts/sm90_session.sh      (SM90_BUDGET_S: stop starting steps after
# this many seconds, default 450)
set -u
OUT=${OUT:-./sm90-out}
mkdir -p "$OUT"
B=build-sm90
B1=build-sm90-v1
BUDGET=${SM90_BUDGET_S:-450}
T0=$(date +%s)
S="$OUT/summary.txt"
log() { echo "== [$(($(date +%s) - T0)) s] $*" | tee -a "$S"; }
left() { echo $((BUDGET - ($(date +%s) - T0))); }
# run STEP_TIMEOUT CMD...: skip when the budget is spent; never longer than what is left
budget_ok() { [ "$(left)" -gt 20 ] || { log "budget spent: skipping $*"; return 1; }; }
tmo() { local t=$1 l; l=$(left); [ "$t" -gt "$l" ] && t=$l; [ "$t" -lt 5 ] && t=5; echo "$t"; }
export PATH=$PATH:/usr/local/cuda/bin

log "$(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader 2>&1)"
log "build (v2 default): lib tests, then cli + sm90_dev"
timeout 240 make BUILD=$B CUDA_ARCHS=90a NVCCEXTRA=-DW8A8_SM90_EPILOGUE_V2 -j16 lib tests >"$OUT/build.txt" 2>&1
rc=$?
[ $rc -eq 0 ] || { tail -n 30 "$OUT/build.txt"; log "build failed ($rc)"; exit 1; }
timeout 120 make BUILD=$B CUDA_ARCHS=90a NVCCEXTRA=-DW8A8_SM90_EPILOGUE_V2 -j16 cli >>"$OUT/build.txt" 2>&1 || log "the CLI did not build: tune and auto bench skipped"
DEVB() { # build the dev bench against library $1
  gcc -O2 -std=c11 -D_GNU_SOURCE -Iinclude -Isrc -I/usr/local/cuda/include bench/sm90_dev.c "$1/lib/libw8a8.a" \
    -L/usr/local/cuda/lib64 -lcudart_static -ldl -lrt -lpthread -lm -fopenmp -lstdc++ -o "$1/bin/sm90_dev" >>"$OUT/build.txt" 2>&1
}
DEVB $B || log "sm90_dev (v2) did not build"
log "build (v1 epilogue, -DW8A8_SM90_EPILOGUE_V1): lib + sm90_dev"
mkdir -p $B1/bin
timeout 200 make BUILD=$B1 CUDA_ARCHS=90a NVCCEXTRA=-DW8A8_SM90_EPILOGUE_V1 -j16 lib >>"$OUT/build.txt" 2>&1 &&
  DEVB $B1 || log "v1 build failed (A/B skipped)"

log "disassembly: wgmma instructions and local memory per kernel"
for b in $B $B1; do
  O=$b/obj/src/cuda/sm90_gemm.cu.o
  [ -f "$O" ] || continue
  echo "-- $b" >>"$S"
  cuobjdump -sass "$O" 2>&1 |
    awk '/Function :/ {f=$3} /QGMMA/ {q[f]++} /IGMMA/ {i[f]++} /HGMMA/ {hh[f]++} /LDL|STL/ {l[f]++} /Function :/ {fs[f]=1}
       /UTMALDG/ {u++} /SYNCS/ {y++}
       END {for (f in fs) printf "  %-80s QGMMA %4d IGMMA %4d HGMMA %d LDL/STL %d\n", substr(f,1,80), q[f], i[f], hh[f], l[f];
            printf "  UTMALDG %d SYNCS %d\n", u, y}' | tee -a "$S"
done

log "wide-N cases of the stall, each under its own timeout (sm90wide_*)"
: >"$OUT/tests.txt"
for t in sm90wide_int8_split8 sm90wide_int8_split1 sm90wide_fp8_split1 sm90wide_n64_split1 sm90wide_token_tiles \
  sm90wide_auto_split1; do
  budget_ok "$t" || break
  timeout -k 5 "$(tmo 45)" $B/bin/w8a8_tests "$t" >>"$OUT/tests.txt" 2>&1
  rc=$?
  log "$t: exit $rc $([ $rc -ge 124 ] && echo '(TIMEOUT: hang)') $(grep -E '^[0-9]+ passed' "$OUT/tests.txt" | tail -n 1)"
  [ $rc -eq 0 ] || grep -E "FAIL|error|differ|wrong" "$OUT/tests.txt" | tail -n 5 | tee -a "$S"
  # a hung kernel may leave the GPU busy for a moment after the kill
  [ $rc -ge 124 ] && sleep 3
done

if budget_ok "test suites"; then
  log "tests (v2): sm90_ tune_ (every config, heuristic, modes, the tuning table on the GPU)"
  W8A8_TEST_VERBOSE=1 timeout -k 5 "$(tmo 110)" $B/bin/w8a8_tests sm90_ tune_ >>"$OUT/tests.txt" 2>&1
  rc=$?
  grep -E "FAIL|SKIP|error" "$OUT/tests.txt" | grep -v "worst error" | tail -n 15 | tee -a "$S"
  grep "worst error" "$OUT/tests.txt" | sort -t= -k2 -g | tail -n 3 | tee -a "$S"
  log "tests (v2) exit $rc: $(grep -E '^[0-9]+ passed' "$OUT/tests.txt" | tail -n 1)"
  if [ $rc -ne 0 ] && [ -x $B1/bin/sm90_dev ]; then
    log "v2 failed: the v1 library's tests"
    timeout -k 5 "$(tmo 120)" make BUILD=$B1 CUDA_ARCHS=90a NVCCEXTRA=-DW8A8_SM90_EPILOGUE_V1 -j16 tests >>"$OUT/build.txt" 2>&1 &&
      timeout -k 5 "$(tmo 110)" $B1/bin/w8a8_tests sm90_ >>"$OUT/tests.txt" 2>&1
    log "tests (v1) exit $?: $(grep -E '^[0-9]+ passed' "$OUT/tests.txt" | tail -n 1)"
  fi
fi

# A/B: the same rows with each epilogue; fp8 first (never timed before this session).
: >"$OUT/bench.txt"
for dt in fp8 int8; do
  for b in $B $B1; do
    [ -x $b/bin/sm90_dev ] || continue
    budget_ok "bench $dt $b" || break
    log "bench $dt $b: heuristic plans, M = 1,16,17,32,33,64,65,128,2048,8192"
    echo "#### $dt $b" >>"$OUT/bench.txt"
    timeout -k 5 "$(tmo 60)" $b/bin/sm90_dev -d $dt -m 1,16,17,32,33,64,65,128,2048,8192 >>"$OUT/bench.txt" 2>&1
    log "bench $dt $b exit $?"
  done
done
if [ -x $B/bin/sm90_dev ] && budget_ok "n32 experiment"; then
  log "bench -a (v2) at M = 17, 32, 64: every config incl. two n16 tiles vs one n32 (the n32 cliff)"
  echo "#### all-configs int8+fp8 $B" >>"$OUT/bench.txt"
  timeout -k 5 "$(tmo 50)" $B/bin/sm90_dev -a -m 17,32,64 -s 70b-qkv,70b-o,8b-qkv,8b-gateup >>"$OUT/bench.txt" 2>&1
  log "bench -a exit $?"
fi

if [ -x $B/bin/w8a8 ] && budget_ok "tune"; then
  log "w8a8 tune --suite llama8b,llama70b-tp4 -m 1,16,32,64,128,512 --dtype both"
  timeout -k 5 "$(tmo 120)" stdbuf -oL $B/bin/w8a8 tune --suite llama8b,llama70b-tp4 -m 1,16,32,64,128,512 --dtype both \
    -o "$OUT/tune.txt" >"$OUT/tune-log.txt" 2>&1
  log "tune exit $?: $(tail -n 1 "$OUT/tune-log.txt")"
  grep -E "^  " "$OUT/tune-log.txt" | awk '$NF+0 >= 1.10' | head -n 20 | tee -a "$S"
  if [ -s "$OUT/tune.txt" ] && budget_ok "tuned bench"; then
    echo "#### tuned (W8A8_TUNE_FILE) int8 $B" >>"$OUT/bench.txt"
    W8A8_TUNE_FILE="$OUT/tune.txt" timeout -k 5 "$(tmo 40)" $B/bin/sm90_dev -d int8 -m 1,16,32,64 >>"$OUT/bench.txt" 2>&1
    log "tuned bench exit $?"
  fi
fi

if [ -x $B/bin/w8a8 ] && budget_ok "auto bench"; then
  log "w8a8 bench --gpu --suite llama8b -m 1,16,64 --dtype both, W8A8_SM90_ALLOW_SPLIT1=1 (the stalled run)"
  W8A8_SM90_ALLOW_SPLIT1=1 timeout -k 5 "$(tmo 90)" stdbuf -oL $B/bin/w8a8 bench --gpu --suite llama8b -m 1,16,64 \
    --dtype both --scales token >"$OUT/auto-bench.txt" 2>&1
  rc=$?
  log "auto bench exit $rc $([ $rc -ge 124 ] && echo '(TIMEOUT: hang)')"
  grep -E "^#|w8a8_cuda" "$OUT/auto-bench.txt" | head -n 40 >>"$S"
fi
log "done"
