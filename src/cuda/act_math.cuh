// act_math.cuh — y = silu(gate) * up on the GPU with the CPU's operations (src/cpu/act_cpu.c), each one IEEE
// operation, so that every kernel that computes y (act.cu, the group quantizer in blockwise.cu) gives its bits.
#pragma once
#include "common.cuh"

/* w8a8_act_expf (src/cpu/act_cpu.c): change both or neither. */
W8A8_DEVFN float act_expf(float x) {
  if (x != x) return x;
  double xd = (double)x;
  if (xd > 100.0) xd = 100.0;
  if (xd < -110.0) xd = -110.0;
  const double shift = 0x1.8p52;
  double kd = __dmul_rn(xd, 0x1.71547652b82fep+0);
  kd = __dadd_rn(kd, shift);
  kd = __dsub_rn(kd, shift);
  double r = __dsub_rn(xd, __dmul_rn(kd, 0x1.62e42fee00000p-1));
  r = __dsub_rn(r, __dmul_rn(kd, 0x1.a39ef35793c76p-33));
  double p = 0x1.ae64567f544e4p-26;
  p = __dadd_rn(__dmul_rn(p, r), 0x1.27e4fb7789f5cp-22);
  p = __dadd_rn(__dmul_rn(p, r), 0x1.71de3a556c734p-19);
  p = __dadd_rn(__dmul_rn(p, r), 0x1.a01a01a01a01ap-16);
  p = __dadd_rn(__dmul_rn(p, r), 0x1.a01a01a01a01ap-13);
  p = __dadd_rn(__dmul_rn(p, r), 0x1.6c16c16c16c17p-10);
  p = __dadd_rn(__dmul_rn(p, r), 0x1.1111111111111p-7);
  p = __dadd_rn(__dmul_rn(p, r), 0x1.5555555555555p-5);
  p = __dadd_rn(__dmul_rn(p, r), 0x1.5555555555555p-3);
  p = __dadd_rn(__dmul_rn(p, r), 0x1.0000000000000p-1);
  p = __dadd_rn(__dmul_rn(p, r), 1.0);
  p = __dadd_rn(__dmul_rn(p, r), 1.0);
  const long long k = (long long)kd;
  const double two_k = __longlong_as_double((k + 1023) << 52);
  return __double2float_rn(__dmul_rn(p, two_k));
}

W8A8_DEVFN float silu_mul(float g, float u) {
  const float e = act_expf(-g);
  const float s = __fdiv_rn(g, __fadd_rn(1.0f, e));
  const float y = __fmul_rn(s, u);
  return y != y ? __uint_as_float(0x7fc00000u) : y; /* one canonical NaN (src/cpu/act_cpu.c) */
}
