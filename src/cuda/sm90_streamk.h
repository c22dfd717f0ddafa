/* sm90_streamk.h — the stream-K schedule of the Hopper GEMM, followed by the SK twins of
 * sm90_gemm_kernel (design: docs/HOPPER.md, "Stream-K"; results: h200-sm90-streamk-2026-11-30.txt). Plain
 * C arithmetic shared by the host (C11 and C++) and the device (CUDA: __host__ __device__), so that the
 * tests check on the CPU exactly what every CTA of the kernel will compute.
 *
 * The problem: `tiles` output tiles of `kblocks` K-blocks each, a grid of `ctas` persistent CTAs (one
 * wave). Where the tiles do not divide into whole waves, the last (partial) wave and one full wave
 * before it become stream-K work (CUTLASS's hybrid, sm90_tile_scheduler_stream_k.hpp): their
 * tiles x kblocks iterations are cut into `units` contiguous ranges, one per CTA; every other tile
 * stays a whole (data-parallel) tile. CTA b runs its unit first (b < units), then the data-parallel
 * tiles b, b + ctas, ... of the linear order after the units.
 *
 * A unit walks its tiles BACKWARDS: first the head of its last tile (K-blocks 0..y, that tile's first
 * split: store the partial, never wait), then whole tiles, last the tail of its first tile (that
 * tile's final split: wait for the earlier splits, add them, run the epilogue). A unit inside one
 * tile is a middle split (wait for the earlier ones, add, pass on). Every split a CTA waits for is the
 * first work item of a lower-numbered unit, so with every unit's CTA resident nothing deadlocks.
 * Unit boundaries are moved to a tile edge where they would leave a split of fewer than `min_split`
 * K-blocks (empty units are allowed: that CTA goes straight to its data-parallel tiles). Where the
 * stream-K tiles are at most half the grid, each is cut into per_tile equal splits instead (one unit
 * each: split-K without a cluster; see sm90_sk_make). */
#ifndef W8A8_SM90_STREAMK_H
#define W8A8_SM90_STREAMK_H

#include <stdint.h>

#if defined(__CUDACC__)
#define SK_FN static __host__ __device__ __forceinline__
#else
#define SK_FN static inline
#endif

#define SK_MIN_SPLIT 8 /* K-blocks: no split shorter than this where a tile has at least 2 x as many */

typedef struct sm90_sk_plan {
  int tiles, kblocks, ctas;
  int sk_tiles;  /* tiles 0 .. sk_tiles-1 are stream-K work; the rest are whole */
  int units;     /* stream-K units = CTAs 0 .. units-1 (0: no stream-K) */
  int64_t base;  /* iterations per unit before snapping: base, the first `extra` units one more */
  int extra;
  int per_tile;  /* > 0: even splits, `per_tile` units per stream-K tile (unit u: tile u / per_tile) */
} sm90_sk_plan;

/* The decomposition. No stream-K (units = 0) where the tiles fill whole waves, where the last wave is
 * at least 80% full, or where a tile has at most SK_MIN_SPLIT K-blocks.
 * CUTLASS's heuristic stops at a half-full last wave; ours goes to 80% to cover a 61%-full case
 * (70b-qkv-tp4 at M = 512: 80 tiles of 128 x 128 on 132 SMs). Which schedules the kernel actually runs
 * is the planner's rule (sm90_plan.c), not this function. */
SK_FN sm90_sk_plan sm90_sk_make(int tiles, int kblocks, int ctas) {
  sm90_sk_plan p;
  p.tiles = tiles;
  p.kblocks = kblocks;
  p.ctas = ctas;
  p.sk_tiles = 0;
  p.units = 0;
  p.base = 0;
  p.extra = 0;
  p.per_tile = 0;
  if (tiles <= 0 || kblocks <= SK_MIN_SPLIT || ctas <= 0) return p;
  const int full = tiles / ctas, tail = tiles % ctas;
  if (tail == 0 || 5 * (int64_t)tail >= 4 * (int64_t)ctas) return p;
  const int sk_tiles = tiles - (full > 1 ? full - 1 : 0) * ctas;
  const int64_t iters = (int64_t)sk_tiles * kblocks;
  int64_t units = iters / SK_MIN_SPLIT;
  if (units > ctas) units = ctas;
  /* Where every stream-K tile can take two or more units, the tiles are split evenly instead
   * (per_tile = ctas / sk_tiles units each, at least SK_MIN_SPLIT K-blocks per unit): the continuous cut
   * with its snapping leaves uneven units (8b-o at M = 256: 15 / 17 / 8 / 24 ... K-blocks), and the
   * longest unit sets the time (h200-sm90-streamk-2026-11-30.txt). */
  if (sk_tiles * 2 <= ctas && kblocks >= 2 * SK_MIN_SPLIT) {
    int s = ctas / sk_tiles;
    if (s > kblocks / SK_MIN_SPLIT) s = kblocks / SK_MIN_SPLIT;
    p.sk_tiles = sk_tiles;
    p.units = sk_tiles * s;
    p.per_tile = s;
    p.base = kblocks / s;
    p.extra = kblocks % s;
    return p;
  }
  p.sk_tiles = sk_tiles;
  p.units = (int)units;
  p.base = iters / units;
  p.extra = (int)(iters % units);
  return p;
}

/* Iteration (tile x kblocks + k) where unit u starts, u = 0..units (units: the end), after snapping. */
SK_FN int64_t sm90_sk_unit_start(const sm90_sk_plan *p, int u) {
  if (p->per_tile > 0) /* even splits: the tile's j-th of per_tile, (kblocks j) / per_tile */
    return (int64_t)(u / p->per_tile) * p->kblocks + (int64_t)p->kblocks * (u % p->per_tile) / p->per_tile;
  const int64_t b = (int64_t)u * p->base + (u < p->extra ? u : p->extra);
  const int64_t o = b % p->kblocks;
  if (o == 0 || p->kblocks < 2 * SK_MIN_SPLIT) return b;  /* short tiles: any split */
  if (o < SK_MIN_SPLIT) return b - o;                      /* to the tile's start */
  if (p->kblocks - o < SK_MIN_SPLIT) return b + (p->kblocks - o);  /* to its end */
  return b;
}

/* One work item: K-blocks [k0, k1) of tile `tile`. role: 0 whole tile (epilogue), 1 first split
 * (store), 2 middle split (wait, add, pass on), 3 final split (wait, add, epilogue). */
typedef struct sm90_sk_item {
  int tile, k0, k1, role;
} sm90_sk_item;

SK_FN int sm90_sk_role(int k0, int k1, int kblocks) {
  return k0 == 0 ? (k1 == kblocks ? 0 : 1) : (k1 == kblocks ? 3 : 2);
}

/* Work items of CTA b in its order: the unit's segments (backwards over its tiles), then the whole
 * tiles. n counts from 0; returns 0 past the last one. */
SK_FN int sm90_sk_item_of(const sm90_sk_plan *p, int b, int n, sm90_sk_item *it) {
  if (b < p->units) {
    const int64_t s = sm90_sk_unit_start(p, b), e = sm90_sk_unit_start(p, b + 1);
    if (e > s) {
      const int last = (int)((e - 1) / p->kblocks), first = (int)(s / p->kblocks);
      if (n <= last - first) {
        const int t = last - n;
        const int64_t t0 = (int64_t)t * p->kblocks;
        it->tile = t;
        it->k0 = (int)((s > t0 ? s : t0) - t0);
        it->k1 = (int)((e < t0 + p->kblocks ? e : t0 + p->kblocks) - t0);
        it->role = sm90_sk_role(it->k0, it->k1, p->kblocks);
        return 1;
      }
      n -= last - first + 1;
    }
  }
  /* whole tiles: linear index b + j * ctas past the units (j = 1.. for a CTA that had a unit) */
  const int64_t idx = (int64_t)b + (int64_t)(b < p->units ? n + 1 : n) * p->ctas - p->units;  /* >= 0 */
  const int64_t t = p->sk_tiles + idx;
  if (t >= p->tiles) return 0;
  it->tile = (int)t;
  it->k0 = 0;
  it->k1 = p->kblocks;
  it->role = 0;
  return 1;
}

/* The partial-tile slot of a split that stores (roles 1 and 2) and how many slots a schedule needs. With
 * even splits (per_tile > 0) each of a tile's first per_tile - 1 splits has a slot of its own,
 * tile * (per_tile - 1) + j for its split j (k0 = kblocks j / per_tile, so j = ceil(k0 per_tile /
 * kblocks) while per_tile <= kblocks), and none of them waits: the final split waits for the count of
 * all of them and adds every slot, one store / load round trip instead of a chain (1.08x at 70b-qkv-tp4
 * M = 256, h200-sm90-session12-2026-11-30.txt). With the continuous cut a tile's splits pass one slot
 * along (each waits for the one before, adds it in, stores the sum). */
SK_FN int64_t sm90_sk_slots(const sm90_sk_plan *p) {
  return p->per_tile > 0 ? (int64_t)p->sk_tiles * (p->per_tile - 1) : p->sk_tiles;
}
SK_FN int sm90_sk_slot(const sm90_sk_plan *p, int tile, int k0) {
  if (p->per_tile <= 0) return tile;
  return tile * (p->per_tile - 1) + (int)(((int64_t)k0 * p->per_tile + p->kblocks - 1) / p->kblocks);
}

/* The tiles on which CTA b runs an epilogue (whole tiles and final splits), in its order, without
 * walking every work item (the kernel's scale-slot warp has 40 registers): its unit's tiles whose last
 * K-block the unit owns, from *hi down to *lo (*hi < *lo: none), then the whole tiles *dp, *dp + ctas,
 * ... below p->tiles. The same sequence as sm90_sk_item_of's items of roles 0 and 3. */
SK_FN void sm90_sk_epi_walk(const sm90_sk_plan *p, int b, int *hi, int *lo, int *dp) {
  *hi = -1;
  *lo = 0;
  if (b < p->units) {
    const int64_t s = sm90_sk_unit_start(p, b), e = sm90_sk_unit_start(p, b + 1);
    if (e > s) {
      *lo = (int)(s / p->kblocks);
      *hi = (int)((e - 1) / p->kblocks) - (e % p->kblocks != 0);
    }
  }
  *dp = (int)(p->sk_tiles + (int64_t)b + (b < p->units ? p->ctas : 0) - p->units);
}

#undef SK_FN
#endif
