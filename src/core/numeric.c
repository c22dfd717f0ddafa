/* numeric.c — scalar conversions between fp32 and bf16, fp16, fp8-e4m3fn, int8.
 * Written with integer bit manipulation so that they round exactly as the
 * hardware conversions on the GPU do (round to nearest even everywhere). */
#include <math.h>
#include <string.h>

#include "internal.h"

static inline uint32_t f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
static inline float bits_f32(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

float w8a8_bf16_to_f32(uint16_t h) { return bits_f32((uint32_t)h << 16); }

uint16_t w8a8_f32_to_bf16(float f) {
  uint32_t u = f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u); /* quiet NaN */
  u += 0x7fffu + ((u >> 16) & 1u);                                            /* RNE */
  return (uint16_t)(u >> 16);
}

float w8a8_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) return bits_f32(sign | 0x7f800000u | (mant << 13)); /* inf / NaN */
  if (exp == 0) {                                                       /* zero / subnormal */
    float v = (float)mant * 0x1p-24f;
    return sign ? -v : v;
  }
  return bits_f32(sign | ((exp + 112u) << 23) | (mant << 13));
}

uint16_t w8a8_f32_to_f16(float f) {
  uint32_t x = f32_bits(f);
  uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
  x &= 0x7fffffffu;
  if (x > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((x >> 13) & 0x3ffu)); /* NaN */
  if (x >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);  /* >= 65520 rounds to inf */
  if (x >= 0x38800000u) {                                    /* normal half: >= 2^-14 */
    x += 0xfffu + ((x >> 13) & 1u);
    return (uint16_t)(sign | ((x - 0x38000000u) >> 13));
  }
  /* subnormal half or zero: multiples of 2^-24, scaling by 2^24 is exact */
  return (uint16_t)(sign | (uint16_t)rintf(bits_f32(x) * 0x1p24f));
}

float w8a8_fp8_to_f32(uint8_t v) {
  uint32_t sign = v & 0x80u;
  uint32_t exp = (v >> 3) & 0xfu;
  uint32_t mant = v & 0x7u;
  float r;
  if (exp == 0xf && mant == 0x7) return sign ? -NAN : NAN;
  if (exp == 0)
    r = (float)mant * 0x1p-9f;
  else
    r = ldexpf(1.0f + (float)mant * 0.125f, (int)exp - 7);
  return sign ? -r : r;
}

uint8_t w8a8_f32_to_fp8(float f) {
  uint32_t u = f32_bits(f);
  uint8_t sign = (uint8_t)((u >> 24) & 0x80u);
  uint32_t x = u & 0x7fffffffu;
  if (x > 0x7f800000u) return (uint8_t)(sign | 0x7fu); /* NaN stays NaN */
  float a = bits_f32(x);
  if (a >= 448.0f) return (uint8_t)(sign | 0x7eu);     /* saturate (inf included) */
  if (a < 0x1p-6f)                                     /* subnormal: multiples of 2^-9 */
    return (uint8_t)(sign | (uint8_t)rintf(a * 512.0f)); /* 8 -> 0x08 = min normal, correct */
  uint32_t e = (x >> 23) - 127u + 7u;                  /* 1..15 */
  uint32_t mant = x & 0x7fffffu;
  uint32_t r = mant >> 20, rem = mant & 0xfffffu;
  if (rem > 0x80000u || (rem == 0x80000u && (r & 1u))) r++;
  if (r == 8) {
    r = 0;
    e++;
  }
  return (uint8_t)(sign | (e << 3) | r);
}

int32_t w8a8_f32_to_int32_sat(float f) {
  if (isnan(f)) return 0;
  if (f >= 2147483647.0f) return INT32_MAX;
  if (f <= -2147483648.0f) return INT32_MIN;
  return (int32_t)f;
}

/* The dynamic quantizers' scale rule (w8a8.h), shared by every host implementation; the int8 rules are in
 * internal.h, shared with the GPU. */
float w8a8_dynamic_scale(float range, float qmax) {
  float s = range / qmax, min_scale = 1.0f / (qmax * 512.0f);
  return s > min_scale ? s : min_scale; /* also maps NaN to MIN_SCALE */
}
