// common.cuh — device helpers shared by the CUDA kernels: number conversions that
// round exactly as src/core/numeric.c does (bit for bit, NaN payloads and signs
// included), and the scaled_mm epilogue formula.
//
// Why not the hardware conversions (cvt.rn.bf16.f32, cvt.rn.satfinite.e4m3x2.f32)?
// They round the same way on finite values but write one canonical NaN, while the
// host reference keeps the sign and payload; the tests compare bits, and a few
// integer instructions cost nothing next to the memory traffic of these kernels.
#ifndef W8A8_CUDA_COMMON_CUH
#define W8A8_CUDA_COMMON_CUH
#include <stdint.h>

#include "../core/internal.h"

#define W8A8_DEVFN static __device__ __forceinline__

W8A8_DEVFN float w8a8d_bf16_to_f32(uint16_t h) { return __uint_as_float((uint32_t)h << 16); }

W8A8_DEVFN uint16_t w8a8d_f32_to_bf16(float f) {
  uint32_t u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u); /* quiet NaN */
  u += 0x7fffu + ((u >> 16) & 1u);                                            /* RNE */
  return (uint16_t)(u >> 16);
}

W8A8_DEVFN float w8a8d_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) return __uint_as_float(sign | 0x7f800000u | (mant << 13));
  if (exp == 0) {
    float v = __fmul_rn((float)mant, 0x1p-24f); /* exact: mant < 2^10 */
    return sign ? -v : v;
  }
  return __uint_as_float(sign | ((exp + 112u) << 23) | (mant << 13));
}

W8A8_DEVFN uint16_t w8a8d_f32_to_f16(float f) {
  uint32_t x = __float_as_uint(f);
  uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
  x &= 0x7fffffffu;
  if (x > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((x >> 13) & 0x3ffu));
  if (x >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);
  if (x >= 0x38800000u) {
    x += 0xfffu + ((x >> 13) & 1u);
    return (uint16_t)(sign | ((x - 0x38000000u) >> 13));
  }
  return (uint16_t)(sign | (uint16_t)rintf(__fmul_rn(__uint_as_float(x), 0x1p24f)));
}

W8A8_DEVFN float w8a8d_fp8_to_f32(uint8_t v) {
  uint32_t sign = (uint32_t)(v & 0x80u) << 24;
  uint32_t exp = (v >> 3) & 0xfu;
  uint32_t mant = v & 0x7u;
  if (exp == 0xf && mant == 0x7) return __uint_as_float(sign | 0x7fc00000u);
  if (exp == 0) return __uint_as_float(sign | __float_as_uint(__fmul_rn((float)mant, 0x1p-9f)));
  return __uint_as_float(sign | ((exp + 120u) << 23) | (mant << 20));
}

W8A8_DEVFN uint8_t w8a8d_f32_to_fp8(float f) {
  uint32_t u = __float_as_uint(f);
  uint8_t sign = (uint8_t)((u >> 24) & 0x80u);
  uint32_t x = u & 0x7fffffffu;
  if (x > 0x7f800000u) return (uint8_t)(sign | 0x7fu);
  float a = __uint_as_float(x);
  if (a >= 448.0f) return (uint8_t)(sign | 0x7eu);
  if (a < 0x1p-6f) return (uint8_t)(sign | (uint8_t)rintf(__fmul_rn(a, 512.0f)));
  uint32_t e = (x >> 23) - 127u + 7u;
  uint32_t mant = x & 0x7fffffu;
  uint32_t r = mant >> 20, rem = mant & 0xfffffu;
  if (rem > 0x80000u || (rem == 0x80000u && (r & 1u))) r++;
  if (r == 8) {
    r = 0;
    e++;
  }
  return (uint8_t)(sign | (e << 3) | r);
}

/* clamp(rne(f) + azp, -128, 127) with the sum exact: src/core/internal.h's rule, the host's own code. */
W8A8_DEVFN int8_t w8a8d_f32_to_int8_rne(float f, int32_t azp) { return w8a8_f32_to_int8_rne(f, azp); }

/* The same with one instruction where azp == 0: cvt.rni.sat.s8.f32 rounds to nearest even, saturates to
 * [-128, 127] and maps NaN to 0 (proven on all 2^32 inputs by w8a8_cuda_quant_math_check). */
W8A8_DEVFN int8_t w8a8d_f32_to_int8_rne_fast(float f, int32_t azp) {
  if (azp != 0) return w8a8d_f32_to_int8_rne(f, azp);
  short r;
  asm("cvt.rni.sat.s8.f32 %0, %1;" : "=h"(r) : "f"(f));
  return (int8_t)r;
}

/* The epilogue of w8a8_scaled_mm: t = sa*v; r = bias ? fmaf(sb, t, bias) : sb*t.
 * Written with explicit _rn intrinsics so nvcc cannot contract sb*(sa*v) into an FMA. */
W8A8_DEVFN float w8a8d_epilogue(float v, float sa, float sb, bool has_bias, float bias) {
  float t = __fmul_rn(sa, v);
  return has_bias ? __fmaf_rn(sb, t, bias) : __fmul_rn(sb, t);
}

/* Load element i of a bf16 / fp16 / fp32 array as fp32 (dt: a w8a8_dtype). */
W8A8_DEVFN float w8a8d_load_float(int dt, const void *base, int64_t i) {
  if (dt == W8A8_DTYPE_BF16) return w8a8d_bf16_to_f32(((const uint16_t *)base)[i]);
  if (dt == W8A8_DTYPE_FP16) return w8a8d_f16_to_f32(((const uint16_t *)base)[i]);
  return ((const float *)base)[i];
}

/* Store r into element i of a bf16 / fp16 / fp32 array, rounding once (RNE). */
W8A8_DEVFN void w8a8d_store_float(int dt, void *base, int64_t i, float r) {
  if (dt == W8A8_DTYPE_BF16)
    ((uint16_t *)base)[i] = w8a8d_f32_to_bf16(r);
  else if (dt == W8A8_DTYPE_FP16)
    ((uint16_t *)base)[i] = w8a8d_f32_to_f16(r);
  else
    ((float *)base)[i] = r;
}

/* Elements [i, i + 8) of a bf16 / fp16 / fp32 array (DT: a w8a8_dtype) as fp32, in one 16-byte
 * (or two, fp32) load: the caller guarantees 16-byte alignment. act.cu and tp_kernels.cu. */
template <int DT>
W8A8_DEVFN void w8a8d_load8(const void *base, int64_t i, float *v) {
  if (DT == W8A8_DTYPE_FP32) {
    const float4 a = *(const float4 *)((const float *)base + i), b = *(const float4 *)((const float *)base + i + 4);
    v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
  } else {
    const uint4 w = *(const uint4 *)((const uint16_t *)base + i);
    const uint32_t u[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
    for (int j = 0; j < 4; j++) {
      const uint16_t lo = (uint16_t)(u[j] & 0xffffu), hi = (uint16_t)(u[j] >> 16);
      v[2 * j] = DT == W8A8_DTYPE_BF16 ? w8a8d_bf16_to_f32(lo) : w8a8d_f16_to_f32(lo);
      v[2 * j + 1] = DT == W8A8_DTYPE_BF16 ? w8a8d_bf16_to_f32(hi) : w8a8d_f16_to_f32(hi);
    }
  }
}


// ---- the quantizers' shared rules (quant.cu, act.cu): bit-identical to the host reference ----

/* max(r / qmax, MIN_SCALE), MIN_SCALE = 1 / (qmax * 512); NaN maps to MIN_SCALE (reference.c). */
W8A8_DEVFN float w8a8d_scale_from(float r, float qmax) {
  float s = __fdiv_rn(r, qmax);
  float min_scale = __fdiv_rn(1.0f, __fmul_rn(qmax, 512.0f));
  return s > min_scale ? s : min_scale;
}

/* x / s as IEEE division (never x * (1/s)), with the host's NaN results: the GPU's division
 * returns one canonical NaN, while the reference runs on an x86 host, whose divss returns the first
 * NaN operand (quieted) or, for an invalid operation such as inf/inf or 0/0, the "indefinite" NaN
 * 0xffc00000, which is negative. Only the sign survives into fp8 (0x7f vs 0xff) and int8 maps NaN
 * to 0, but the tests compare bits, and a row holding an inf with a dynamic scale hits inf/inf. */
W8A8_DEVFN float w8a8d_div_like_host(float x, float s) {
  float y = __fdiv_rn(x, s);
  if (y != y) y = x != x ? __uint_as_float(__float_as_uint(x) | 0x00400000u)
                  : s != s ? __uint_as_float(__float_as_uint(s) | 0x00400000u)
                           : __uint_as_float(0xffc00000u);
  return y;
}


/* w8a8d_f32_to_fp8's result through the hardware's conversion (sm_89+: cvt.rn.satfinite.e4m3x2.f32 rounds to nearest
 * even and saturates +-inf and |x| >= 448 to +-448), for every input: the hardware's NaN is 0x7f whatever the sign,
 * the reference keeps the sign (fixed here). Proven on all 2^32 inputs by w8a8_cuda_quant_math_check. */
W8A8_DEVFN uint8_t w8a8d_f32_to_fp8_fast(float f) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  unsigned short r;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(0.0f), "f"(f));
  if (f != f) return (uint8_t)(((__float_as_uint(f) >> 24) & 0x80u) | 0x7fu);
  return (uint8_t)(r & 0xffu);
#else
  return w8a8d_f32_to_fp8(f);
#endif
}

/* w8a8d_div_like_host(x, s) for a divisor s > 0 given with rcp = __fdiv_rn(1, s): Markstein's correction of x * rcp
 * (q = RN(x rcp), r = x - s q exactly by FMA, RN(q + r rcp) is the correctly rounded x / s when rcp is the correctly
 * rounded 1 / s and nothing over- or underflows), taken where |x| and the quotient lie in [2^-100, 2^100] (the
 * residual then stays normal) or x is +-0; anything else (NaN, inf, extreme exponents) goes to the division itself.
 * Checked against w8a8d_div_like_host by w8a8_cuda_quant_math_check. */
W8A8_DEVFN float w8a8d_div_rcp(float x, float s, float rcp) {
  if (x == 0.0f) return __fmul_rn(x, rcp);
  const float q = __fmul_rn(x, rcp);
  const float q1 = __fmaf_rn(__fmaf_rn(-q, s, x), rcp, q);
  const float ax = fabsf(x), aq = fabsf(q1);
  if (ax >= 0x1p-100f && ax <= 0x1p100f && aq >= 0x1p-100f && aq <= 0x1p100f) return q1;
  return w8a8d_div_like_host(x, s);
}

/* One quantized byte of x / s: fp8 e4m3 bits, or int8 (as uint8) with zero point azp; the reference's bits
 * (numeric.c). rcp >= 0: s > 0 and rcp = __fdiv_rn(1, s), the division through it (w8a8d_div_rcp: a dynamic
 * scale, the kernels compute rcp once a row); rcp < 0: the division itself (any s: a caller's static scale). */
W8A8_DEVFN uint8_t w8a8d_quant8(bool fp8, float x, float s, float rcp, int32_t azp) {
  const float y = rcp >= 0.0f ? w8a8d_div_rcp(x, s, rcp) : w8a8d_div_like_host(x, s);
  return fp8 ? w8a8d_f32_to_fp8_fast(y) : (uint8_t)w8a8d_f32_to_int8_rne_fast(y, azp);
}
/* The rcp argument of w8a8d_quant8 for scale s: dynamic (s from the data, > 0) or the caller's static one. */
W8A8_DEVFN float w8a8d_quant_rcp(bool dynamic, float s) { return dynamic ? __fdiv_rn(1.0f, s) : -1.0f; }

/* A row's running range for its dynamic scale: max |v| (symmetric) or max v and min v (asym). fmaxf / fminf drop
 * NaN, like the reference's comparisons. */
W8A8_DEVFN void w8a8d_track(bool asym, float v, float &hi, float &lo) {
  if (asym) {
    hi = fmaxf(hi, v);
    lo = fminf(lo, v);
  } else {
    hi = fmaxf(hi, fabsf(v));
  }
}

/* Eight quantized bytes of y[0..7] stored as one 8-byte word at q (8-byte aligned). */
W8A8_DEVFN void w8a8d_store_q8(uint8_t *q, bool fp8, const float *y, float s, float rcp, int32_t azp) {
  uint32_t w[2] = {0, 0};
#pragma unroll
  for (int j = 0; j < 8; j++) w[j / 4] |= (uint32_t)w8a8d_quant8(fp8, y[j], s, rcp, azp) << (8 * (j % 4));
  *(uint2 *)q = make_uint2(w[0], w[1]);
}

/* A row's scale (and zero point) from its reduced hi (max |x|, or max x when asym) and lo (min x):
 * w8a8_dynamic_scale / w8a8_asym_params (numeric.c). */
W8A8_DEVFN void w8a8d_row_scale(bool asym, float hi, float lo, int64_t K, float qmax, const float *scale_ub,
                              float *s_out, int32_t *azp_out) {
  float s;
  int32_t azp = 0;
  if (asym) {
    w8a8_asym_params(K ? lo : 0.0f, K ? hi : 0.0f, &s, &azp); /* src/core/internal.h's rule */
  } else {
    float amax = hi;
    if (scale_ub) amax = fminf(amax, *scale_ub);
    s = w8a8d_scale_from(amax, qmax);
  }
  *s_out = s;
  *azp_out = azp;
}

/* Block-wide max of a and min of b (b only when two), the result in every thread; BLOCK = blockDim.x,
 * a multiple of 32. The final loop stays rolled: unrolled, or with a runtime count, ptxas spilled
 * in one of the two per-token kernels (their row values stay in registers across this call). The
 * shared memory is reused by the next call: the caller synchronizes the block between calls. */
template <int BLOCK>
W8A8_DEVFN void w8a8d_block_reduce_max_min(float &a, float &b, bool two) {
  static_assert(BLOCK % 32 == 0 && BLOCK <= 1024, "block size");
  __shared__ float sa[BLOCK / 32], sb[BLOCK / 32];
  for (int o = 16; o > 0; o >>= 1) {
    a = fmaxf(a, __shfl_xor_sync(0xffffffffu, a, o));
    if (two) b = fminf(b, __shfl_xor_sync(0xffffffffu, b, o));
  }
  int w = threadIdx.x >> 5, l = threadIdx.x & 31;
  if (l == 0) {
    sa[w] = a;
    sb[w] = b;
  }
  __syncthreads();
  a = sa[0];
  b = sb[0];
#pragma unroll 1
  for (int i = 1; i < BLOCK / 32; i++) {
    a = fmaxf(a, sa[i]);
    if (two) b = fminf(b, sb[i]);
  }
}

#endif
