#!/bin/bash
# build_ptx.sh — step "build_ptx": the library and test binary from PTX alone, one build per architecture of
# ARCHS_PTX (default "75 80 89"): $BUILD_PTX-<arch> (BUILD_PTX default build-ptx), made with
# `make CUDA_ARCHS= CUDA_ARCHS_PTX=<arch>`, for the "ptx" test suite (test.sh). One architecture per build:
# from several, the driver would compile only the newest this GPU takes. The builds run side by side. Each
# test binary's fatbin is listed into $L/build-ptx-<arch>.txt (its .nv_fatbin entries, read here; cuobjdump's
# listing too where it is installed), and one holding any SASS or other PTX than its own fails the step.
. "$(dirname "$0")/lib.sh"
BP=${BUILD_PTX:-build-ptx}
ARCHS=${ARCHS_PTX:-75 80 89}
CUOBJDUMP=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
t=$(cap 420)
for a in $ARCHS; do
  (
    timeout -k 5 "$t" make BUILD="$BP-$a" CUDA_ARCHS= CUDA_ARCHS_PTX="$a" -j"$(nproc)" lib tests
    echo "make exit $?"
  ) >"$L/build-ptx-$a.txt" 2>&1 &
done
wait
# "PTX 75" / "SASS 90" per entry of an ELF file's .nv_fatbin section (the fatbin header, then entries of
# kind 1 PTX / 2 ELF, the architecture at byte 28 of each entry's header).
fatbin_entries() {
  python3 - "$1" <<'EOF'
import struct, sys
data = open(sys.argv[1], "rb").read()
shoff, = struct.unpack_from("<Q", data, 0x28)
shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
heads = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
names = data[heads[shstrndx][4]:heads[shstrndx][4] + heads[shstrndx][5]]
for h in heads:
    if names[h[0]:names.index(b"\0", h[0])] != b".nv_fatbin":
        continue
    blob, off = data[h[4]:h[4] + h[5]], 0
    while off + 16 <= len(blob):
        magic, _, hsize, size = struct.unpack_from("<IHHQ", blob, off)
        if magic != 0xBA55ED50:
            off += 8
            continue
        e, end = off + hsize, off + hsize + size
        while e < end:
            kind, _, ehs, padded = struct.unpack_from("<HHII", blob, e)
            print({1: "PTX", 2: "SASS"}.get(kind, "kind%d" % kind), struct.unpack_from("<I", blob, e + 28)[0])
            e += ehs + padded
        off = end
EOF
}
fail=0
res=""
for a in $ARCHS; do
  log="$L/build-ptx-$a.txt"
  if [ "$(tail -n 1 "$log")" != "make exit 0" ]; then
    tail -n 20 "$log"
    res="$res $a:$(tail -n 1 "$log" | tr ' ' '_')"
    fail=1
    continue
  fi
  tb="$BP-$a/bin/w8a8_tests"
  entries=$(fatbin_entries "$tb" | sort | uniq -c | awk '{print $2 "_" $3 "x" $1}' | tr '\n' ' ')
  echo "== the fatbin of $tb: $entries" >>"$log"
  [ -x "$CUOBJDUMP" ] && "$CUOBJDUMP" --list-elf --list-ptx "$tb" >>"$log" 2>&1
  res="$res $a:[ $entries]"
  if [ -z "$entries" ] || [ "$(echo "$entries" | tr ' ' '\n' | grep -vc "^PTX_${a}x\|^$")" -ne 0 ]; then fail=1; fi
done
echo "build_ptx:$res"
exit $fail
