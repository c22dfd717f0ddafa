#!/bin/bash
# tpl2.sh — step "tpl2" (issue 6, session 18; needs 2 GPUs): bench/tp_interfere, the all-gather GEMM of
# 70b-qkv at TP = 2 on GPU 0 alone / while GPU 0 pulls 32 MiB from GPU 1 / while GPU 1 pushes them into GPU 0 /
# while GPU 0 copies 32 MiB locally: is the push all-gather's slower GEMM (session 17) the incoming writes?
# TPL2_M (tokens, default "1024 8192"), TPL2_MIB (32). Env from device_session.sh: L, BUILD, LEFT_S.
set -u
: "${L:?}" "${BUILD:?}"
LEFT_S=${LEFT_S:-120}
. "$(dirname "$0")/common.sh"
mkdir -p "$BUILD/bin"
build_bench bench/tp_interfere.c "$BUILD/lib/libw8a8.a" "$BUILD/bin/tp_interfere" >"$L/tpl2-build.txt" 2>&1 ||
  { echo "tpl2: tp_interfere did not build (tpl2-build.txt)"; exit 1; }
res=""
# Session 19: modes out / bothpush / bothpull and -s (the fused op's 16 KB peer-scale copy before the GEMM on
# its stream) added after the first run; TPL2_DTYPES (default "int8 fp8"), TPL2_SMALL ("0 1": without, with -s).
for m in ${TPL2_M:-1024 8192}; do
  for d in ${TPL2_DTYPES:-int8 fp8}; do
    for sm in ${TPL2_SMALL:-0 1}; do
      sa=()
      [ "$sm" = 1 ] && sa=(-s)
      timeout -k 5 "$(cap 60)" "$BUILD/bin/tp_interfere" -d "$d" -m "$m" -b "${TPL2_MIB:-32}" -n 10 "${sa[@]}" \
        >>"$L/tpl2.txt" 2>&1
      res="$res $d/$m${sa[0]:+ -s}: exit $?;"
    done
  done
done
echo "tpl2:$res"
