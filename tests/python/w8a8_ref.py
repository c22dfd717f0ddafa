"""An independent NumPy reference of the arithmetic that include/w8a8.h documents, for the Python tests.

Written from the header's formulas, not from the library's C code, and sharing nothing with the
package's own conversion helpers: fp8 values come from a 256-entry table built with math.ldexp,
encoding is a nearest-value search in that table, the fused multiply-add is made exact with an
error-free transformation in float64.
"""
import math

import numpy as np

F32 = np.float32

# ---------------------------------------------------------------- fp8 e4m3fn


def _e4m3_value(code):
    s = -1.0 if code & 0x80 else 1.0
    e, m = (code >> 3) & 0xF, code & 7
    if e == 15 and m == 7:
        return math.nan
    if e == 0:
        return s * math.ldexp(m, -9)
    return s * math.ldexp(8 + m, e - 10)


FP8_TABLE = np.array([_e4m3_value(c) for c in range(256)], dtype=np.float64)
_POS = FP8_TABLE[:127]  # codes 0..126: 0 .. 448, increasing


def fp8_decode(bits):
    return FP8_TABLE[np.asarray(bits).view(np.uint8)].astype(np.float32)


def fp8_encode(v):
    """float32 -> e4m3fn bits: clamp to +-448, round to nearest, ties to the even code; NaN -> 0x7f|sign."""
    v = np.asarray(v, dtype=np.float32)
    sign = (np.signbit(v)).astype(np.uint8) << 7
    a = np.minimum(np.abs(v).astype(np.float64), 448.0)
    hi = np.clip(np.searchsorted(_POS, a, side="left"), 0, 126)
    lo = np.clip(hi - 1, 0, 126)
    dlo, dhi = a - _POS[lo], _POS[hi] - a
    pick = np.where(dlo < dhi, lo, np.where(dhi < dlo, hi, np.where(lo % 2 == 0, lo, hi)))
    pick = np.where(_POS[hi] == a, hi, pick)
    out = (pick.astype(np.uint8) | sign).astype(np.uint8)
    return np.where(np.isnan(v), (0x7F | sign).astype(np.uint8), out)


def random_fp8(rng, shape, lo_exp=-6):
    """Random finite e4m3 codes (no NaN), spread over magnitudes 2^lo_exp .. 448."""
    codes = rng.integers(0, 256, size=shape).astype(np.uint8)
    codes = np.where((codes & 0x7F) == 0x7F, codes ^ 0x01, codes)
    return codes

# ---------------------------------------------------------------- bf16 / fp16


def bf16_decode(bits):
    return (np.asarray(bits).view(np.uint16).astype(np.uint32) << 16).view(np.float32)


def bf16_encode(v):
    """float32 -> bf16 bits, round to nearest even (by comparing the two neighbours exactly)."""
    v = np.asarray(v, dtype=np.float32)
    u = v.view(np.uint32)
    down = (u >> 16).astype(np.uint32)
    up = down + 1
    f_down = (down << 16).view(np.float32).astype(np.float64)
    f_up = (up << 16).view(np.float32).astype(np.float64)
    x = v.astype(np.float64)
    # For negative values the bit pattern order is the magnitude order too: compare magnitudes.
    d_down, d_up = np.abs(x - f_down), np.abs(f_up - x)
    pick = np.where(d_down < d_up, down, np.where(d_up < d_down, up, np.where(down % 2 == 0, down, up)))
    pick = np.where((u & 0xFFFF) == 0, down, pick)
    pick = np.where(np.isnan(v), down | 0x40, pick)
    return pick.astype(np.uint16)


def to_out(r, out_dtype):
    """fp32 -> the output dtype's bits / values, rounded once to nearest even."""
    if out_dtype == "bf16":
        return bf16_encode(r)
    if out_dtype == "fp16":
        return r.astype(np.float16)  # NumPy rounds to nearest even
    return r.astype(np.float32)


def out_bits(arr, out_dtype):
    """The comparable representation of a library output."""
    if out_dtype == "bf16":
        return np.asarray(arr).view(np.uint16)
    return np.asarray(arr)


def out_float(arr, out_dtype):
    if out_dtype == "bf16":
        return bf16_decode(arr)
    return np.asarray(arr).astype(np.float32)

# ---------------------------------------------------------------- epilogue


def _fmaf(a, b, c):
    """fmaf on float32 arrays, exactly: a*b is exact in float64; TwoSum gives the rounding error of
    the float64 sum; a float64 sum that sits exactly on a float32 rounding midpoint is nudged toward
    the error's sign so that the conversion rounds the exact value."""
    p = a.astype(np.float64) * b.astype(np.float64)
    c = c.astype(np.float64)
    s = p + c
    bb = s - p
    err = (p - (s - bb)) + (c - bb)
    s32 = s.astype(np.float32)
    # midpoint test: the float32 neighbours of s around s32
    other = np.where(s.astype(np.float64) > s32.astype(np.float64), np.nextafter(s32, np.float32(np.inf)),
                     np.nextafter(s32, np.float32(-np.inf)))
    mid = (s32.astype(np.float64) + other.astype(np.float64)) / 2
    on_mid = (s == mid) & (err != 0)
    nudged = np.where(err > 0, np.nextafter(s, np.inf), np.nextafter(s, -np.inf))
    return np.where(on_mid, nudged, s).astype(np.float32)


def epilogue(v, sa, sb, bias):
    """v: [M,N] float32 accumulator (converted), sa: [M,1] or scalar, sb: [1,N] or scalar, bias: [N] f32 or None."""
    M, N = v.shape
    sa = np.broadcast_to(np.asarray(sa, np.float32).reshape(-1, 1), (M, 1))
    sb = np.broadcast_to(np.asarray(sb, np.float32).reshape(1, -1), (1, N))
    t = (sa * v).astype(np.float32)
    if bias is None:
        return (np.broadcast_to(sb, (M, N)) * t).astype(np.float32)
    return _fmaf(np.broadcast_to(sb, (M, N)), t, np.broadcast_to(np.asarray(bias, np.float32).reshape(1, N), (M, N)))


def scaled_mm_int8(a, b, sa, sb, bias=None, azp=None, azp_adj=None):
    """a [M,K] int8, b [K,N] int8. Returns the fp32 epilogue result r (round with to_out)."""
    acc = a.astype(np.int64) @ b.astype(np.int64)
    if azp_adj is not None:
        adj = np.asarray(azp_adj, np.int64).reshape(1, -1)
        if azp is None:
            acc = acc - adj
        else:
            acc = acc - np.asarray(azp, np.int64).reshape(-1, 1) * adj
    assert np.all(np.abs(acc) < 2 ** 31)
    return epilogue(acc.astype(np.float32), sa, sb, bias)


def scaled_mm_fp8(a_bits, b_bits, sa, sb, bias=None):
    """Exact float64 products and sums; returns (r float64 reference, bound of |sum error| before scaling)."""
    A, B = fp8_decode(a_bits).astype(np.float64), fp8_decode(b_bits).astype(np.float64)
    v = A @ B
    absum = np.abs(A) @ np.abs(B)
    M, N = v.shape
    sa = np.broadcast_to(np.asarray(sa, np.float64).reshape(-1, 1), (M, 1))
    sb = np.broadcast_to(np.asarray(sb, np.float64).reshape(1, -1), (1, N))
    r = sa * sb * v
    if bias is not None:
        r = r + np.asarray(bias, np.float64).reshape(1, N)
    return r, np.abs(sa * sb) * absum

# ---------------------------------------------------------------- quantizers


def scale_from(r, qmax):
    s = (np.asarray(r, np.float32) / F32(qmax)).astype(np.float32)
    mn = F32(1.0) / (F32(qmax) * F32(512.0))
    return np.where(s > mn, s, mn).astype(np.float32)


def amax_rows(x):
    a = np.abs(x.astype(np.float32))
    return np.where(np.isnan(a), 0, a).max(axis=1, initial=0).astype(np.float32)


def quant_fp8(x, s):
    y = (x.astype(np.float32) / np.asarray(s, np.float32)).astype(np.float32)
    return fp8_encode(y)


def quant_int8(x, s, azp=0):
    """clamp(rne(x / s) + azp, -128, 127), the sum exact (never rne saturated to int32 first); NaN counts as 0."""
    y = (x.astype(np.float32) / np.asarray(s, np.float32)).astype(np.float32)
    r = np.rint(np.where(np.isnan(y), 0, y)).astype(np.float64)
    r = np.clip(r, -2.0 ** 40, 2.0 ** 40)  # past 2^40 the result no longer depends on r: the float64 sum stays exact
    return np.clip(r + np.asarray(azp, np.float64), -128, 127).astype(np.int8)


def asym_params(x):
    """Per-token (scale, azp) of dynamic asymmetric int8: s = max((hi - lo) / 255, MIN_SCALE, |lo| 2^-30), but |c|
    for a constant row c != 0; azp = rne(-128 - lo / s) saturated to int32 (w8a8.h)."""
    xf = x.astype(np.float32)
    xs = np.where(np.isnan(xf), np.inf, xf)
    lo = xs.min(axis=1, initial=np.inf).astype(np.float32)
    xs = np.where(np.isnan(xf), -np.inf, xf)
    hi = xs.max(axis=1, initial=-np.inf).astype(np.float32)
    if xf.shape[1] == 0:
        lo = hi = np.zeros(xf.shape[0], np.float32)
    alo = np.abs(lo).astype(np.float32)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        s = ((hi - lo).astype(np.float32) / F32(255.0)).astype(np.float32)
        mn = F32(1.0) / (F32(127.0) * F32(512.0))
        s = np.where(s > mn, s, mn).astype(np.float32)
        floor_s = (alo * F32(2.0 ** -30)).astype(np.float32)
        s = np.where((floor_s > s) & np.isfinite(floor_s), floor_s, s).astype(np.float32)
        s = np.where((lo == hi) & (lo != 0) & np.isfinite(lo), alo, s).astype(np.float32)
        z = np.rint((F32(-128.0) - (lo / s).astype(np.float32)).astype(np.float32)).astype(np.float64)
    z = np.where(np.isnan(z), 0, np.clip(z, -2.0 ** 31, 2.0 ** 31 - 1))
    return s, z.astype(np.int64).astype(np.int32)

# ---------------------------------------------------------------- fused SiLU-and-mul
#
# The header pins e = expf(-g) only to "within 0.5 + 2^-20 ulp of exp". Wherever exp(-g) is farther
# than that from a float32 rounding midpoint, the only float32 within the bound is the correctly
# rounded one, so the bits are fixed; near a midpoint either neighbour is allowed. NumPy's float32
# exp is not correctly rounded (it may be off by an ulp), so the reference takes exp in float64
# (error a few 2^-53, i.e. ~2^-29 of a float32 ulp) and rounds once to float32: correctly rounded
# except within ~2^-29 ulp of a midpoint. exp_f32 flags every element whose exp lies within
# TIE_MARGIN ulp of a midpoint (far wider than both errors); the tests move such gate values (one
# step of the input dtype) before calling the library, so every byte they compare is pinned by the
# header. The rest (1 + e, g / d, silu * u) are single IEEE float32 operations, which NumPy's
# float32 arithmetic performs exactly so.

TIE_MARGIN = 2.0 ** -12
CANONICAL_NAN = np.array([0x7FC00000], np.uint32).view(np.float32)[0]


def exp_f32(v):
    """(exp(v) correctly rounded to float32, mask of elements within TIE_MARGIN ulp of a midpoint)."""
    v = np.asarray(v, np.float32)
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        e64 = np.exp(v.astype(np.float64))
        e32 = e64.astype(np.float32)
    big = np.float64(2.0 ** 128)  # where the next float32 after FLT_MAX would be
    lo = np.nextafter(e32, np.float32(-np.inf)).astype(np.float64)
    hi = np.nextafter(e32, np.float32(np.inf)).astype(np.float64)
    c = e32.astype(np.float64)
    fmax = np.float64(np.finfo(np.float32).max)
    # e32 == inf (overflow): the only midpoint that matters is (FLT_MAX + 2^128) / 2
    c = np.where(np.isinf(c) & (c > 0), big, c)
    lo = np.where(c == big, fmax, lo)
    hi = np.where(np.isinf(hi), big, hi)
    with np.errstate(invalid="ignore", divide="ignore"):
        d_lo = np.abs(e64 - (lo + c) / 2) / (c - lo)
        d_hi = np.abs(e64 - (c + hi) / 2) / (hi - c)
    amb = (np.minimum(d_lo, d_hi) < TIE_MARGIN) & np.isfinite(e64) & (e64 > 0)
    return e32, amb


def silu_mul(g, u):
    """y = silu(g) * u in float32 as w8a8.h specifies; returns (y, mask of gate elements where the
    header leaves the bits of e open: see exp_f32)."""
    g = np.asarray(g, np.float32)
    u = np.asarray(u, np.float32)
    e, amb = exp_f32(-g)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        d = (np.float32(1.0) + e).astype(np.float32)
        s = (g / d).astype(np.float32)
        y = (s * u).astype(np.float32)
    y = np.where(np.isnan(y), CANONICAL_NAN, y).astype(np.float32)
    return y, amb


def silu_mul_rows(xf):
    """x [M, 2I] float32 -> (y [M, I], ambiguity mask [M, I])."""
    I = xf.shape[1] // 2
    return silu_mul(xf[:, :I], xf[:, I:])
