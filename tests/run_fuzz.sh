#!/bin/sh
# run_fuzz.sh BIN SECONDS — run the libFuzzer target BIN for SECONDS (default 60) from an
# empty corpus. Ends with "1 passed, 0 failed", or "0 passed, 1 failed" and the path of the
# crashing input (replay it with: BIN FILE).
BIN=$1
SECONDS_=${2:-60}
if [ ! -x "$BIN" ]; then
  echo "run_fuzz: $BIN is not an executable (make fuzz builds it)"
  echo "0 passed, 1 failed"
  exit 1
fi
dir=$(mktemp -d "${TMPDIR:-/tmp}/w8a8-fuzz.XXXXXX")
mkdir -p "$dir/corpus"
# Small inputs are enough to describe a call; keep one process, one thread, and a per-input
# timeout far above what the small GEMMs take.
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
  "$BIN" -max_total_time="$SECONDS_" -max_len=1024 -timeout=20 -rss_limit_mb=4096 -print_final_stats=1 \
  -artifact_prefix="$dir/" "$dir/corpus" >"$dir/log" 2>&1
rc=$?
grep -E '^#[0-9]+.*(DONE|pulse)|stat::number_of_executed_units|stat::peak_rss' "$dir/log" | tail -n 4
if [ $rc -eq 0 ] && ! ls "$dir"/crash-* "$dir"/leak-* "$dir"/timeout-* >/dev/null 2>&1; then
  rm -rf "$dir"
  echo "1 passed, 0 failed"
  exit 0
fi
echo "run_fuzz: $BIN failed (exit $rc); log and artifacts in $dir:"
grep -E 'fuzz_[a-z]*:|ERROR|SUMMARY|runtime error' "$dir/log" | head -n 20
ls "$dir"
echo "0 passed, 1 failed"
exit 1
