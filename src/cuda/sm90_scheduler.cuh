// sm90_scheduler.cuh — which tile a work item is, and which token rows a tile covers (the grouped tile
// order, multicast pairs, the token tail's fold and shift) in the sm_90a GEMM kernels.
#pragma once
#include "sm90_kernel_args.cuh"

// Tile t of the grouped order -> (tile_x, tile_y). Groups of a.group tiles (SM90_GROUP, fewer in ready
// launches) along X walk Y; inside a group X moves fastest, so the CTAs running at one time share a
// few X tiles and a band of Y tiles in L2.
SM90_DEV void sm90_tile_coords(const sm90_args &a, int t, int &tx, int &ty) {
  const int group = a.group;
  int per_group = group * a.tiles_y;
  int g = t / per_group;
  int first = g * group;
  int gsize = min(a.tiles_x - first, group);
  int local = t - g * per_group;
  tx = first + local % gsize;
  ty = local / gsize;
  if (a.rot_x) tx = (tx + a.rot_x) % a.tiles_x;
  if (a.rot_y) ty = (ty + a.rot_y) % a.tiles_y;
}

// Work item t -> tile. MULTICAST = 1: sm90_tile_coords. MULTICAST = 2: item t is a pair of X tiles (2p, 2p + 1) with
// one Y tile, in the same grouped order over pairs; pair_rank picks the tile of the pair. A partner past
// the last X tile keeps tx = tiles_x (out of bounds: zeros in, nothing out; unswapped, no ready flags to wait on;
// swapped, the producer waits for its pair's token rows, as the partner does).
template <int MULTICAST>
SM90_DEV void sm90_item_coords(const sm90_args &a, int t, int pair_rank, int &tx, int &ty) {
  if constexpr (MULTICAST == 1) {
    (void)pair_rank;
    sm90_tile_coords(a, t, tx, ty);
  } else {
    const int pairs_x = (a.tiles_x + 1) / 2;
    const int per_group = SM90_GROUP * a.tiles_y;
    const int g = t / per_group;
    const int first = g * SM90_GROUP;
    const int gsize = min(pairs_x - first, SM90_GROUP);
    const int local = t - g * per_group;
    tx = 2 * (first + local % gsize) + pair_rank;
    ty = local / gsize;
    if (tx < a.tiles_x && a.rot_x) tx = (tx + a.rot_x) % a.tiles_x;
    if (a.rot_y) ty = (ty + a.rot_y) % a.tiles_y;
  }
}

// The fold (unswapped tail twins, a single partial token tile of 65..127 rows, no ready
// flags): tail_n = 1 and tail_rows = SM90_BM (which tail_plan's boxes never are: their rows are fewer
// than the box's), tmap_t a 3-D map of two 64-row blocks, rows [0, 64) and [M - 64, M), loaded by one
// box into the stage's 128 rows. Every row read is a row of A: no out-of-bounds fill and no short box
// (reading real rows was the fastest form of such a tile on every shape measured:
// h200-sm90-session16-2026-11-30.txt). Consumer warpgroup 1's 64 rows are then tokens
// M - 64 .. M - 1 (row r of the tile: token M - 128 + r); the tokens both warpgroups hold (M - 64 .. 63)
// are computed twice from the same bytes by the same instructions and stored twice with the same bits.
// Where the driver refuses that map (its strides overlap), the host falls back to two 2-D boxes of 64 rows
// at rows 0 and M - 64 (tail_n = 2, tail_rows = 64: no other tail of an unswapped 128-row tile has that
// form, their boxes being one, or eighths of the tile); the stage is the same.
// Unswapped kernels only: a swapped n144 / n160 twin may run one ordinary tail box of 128 rows too (the
// host's tail_is_fold asks for an unswapped tile); every caller here sits behind !SWAP.
SM90_DEV bool sm90_tail_fold(const sm90_args &a) {
  return a.tail_rows == SM90_BM || (a.tail_n == 2 && a.tail_rows == SM90_BM / 2);
}
// The first token of the 64 rows of consumer warpgroup cw (0 or 1) whose place in the tile the caller's
// row0 = tile row 0 + cw * 64 (+ an offset below 64) gives: row0 itself, or with the fold (FOLD kernels
// only; the others compile the caller's expression unchanged) M - 64 + the offset for warpgroup 1.
template <bool FOLD>
SM90_DEV int sm90_fold_row(const sm90_args &a, int row0, int cw) {
  if constexpr (FOLD)
    if (cw == 1 && sm90_tail_fold(a)) return a.M - 128 + row0 % 128;
  return row0;
}
// The first token row of token tile tx in the unswapped kernels that take the shift (SHIFT: no split-K or stream-K;
// the others compile tx * SM90_BM unchanged): tx * SM90_BM, or rows_x - SM90_BM where a.shift_x is set
// and tile tx is the partial last one (a tile wholly past the last token, a MULTICAST = 2 pair's missing partner, keeps
// its rows: the epilogue's bound on M stores nothing of it).
template <bool SHIFT>
SM90_DEV int sm90_x_row0(const sm90_args &a, int tx) {
  const int r = tx * SM90_BM;
  if constexpr (SHIFT)
    if (a.shift_x && r < a.rows_x && r + SM90_BM > a.rows_x) return a.rows_x - SM90_BM;
  return r;
}
// Which of the main kernel's tiles take the shift (sm90_x_row0: unswapped, no split-K or stream-K, whose other
// K splits would give the shared rows other fp8 sums) and the fold (sm90_fold_row: the unswapped unsplit unicast
// token-tail twins, the only ones tail_plan gives a fold).
template <bool SWAP, bool SPLITK, bool STREAMK, bool TAIL, int MULTICAST>
struct sm90_token_rows {
  static constexpr bool SHIFT = !SWAP && !SPLITK && !STREAMK;
  static constexpr bool FOLD = TAIL && !SWAP && !SPLITK && MULTICAST == 1;
};
// The first token row of token tile ty. The last tile, where partial and at least BN tokens (a.tail_n: the skinny
// kernel's use of the tail field), is shifted to end at the last token: its rows are all real rows of A, with no
// out-of-bounds fill (TMA fills a mostly empty box slowly: ~4 cycles per missing row and stage beyond ~16; 8b-o's
// 65 tokens on n64 pairs ran 1.2x slower than 100 tokens, h200-session24-2026-12-01.txt). The
// tokens it shares with the previous tile are computed again from the same bytes by the same instructions and
// stored again with the same bits. A tile wholly past the last token (a pair's missing partner) stays put.
template <int BN>
SM90_DEV int sm90_skinny_row0(const sm90_args &a, int ty) {
  const int r = ty * BN;
  return a.tail_n && r < a.rows_y && r + BN > a.rows_y && a.rows_y >= BN ? a.rows_y - BN : r;
}
