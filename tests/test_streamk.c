/* test_streamk.c — the stream-K schedule (src/cuda/sm90_streamk.h), on the CPU: the arithmetic the
 * Hopper kernel's CTAs will run, checked for every combination of tile count, K-blocks and grid in a
 * sweep: every (tile, K-block) iteration is done exactly once, every tile has exactly one epilogue,
 * no split is shorter than SK_MIN_SPLIT where the tile allows it, and the fix-up protocol (a lock per
 * tile counting the K-blocks summed so far; a split waits until the lock reaches its first K-block)
 * runs to the end with every CTA taking its items in order and blocking where it must wait: no
 * deadlock, whatever the order in which the CTAs progress. */
#include <stdlib.h>
#include <string.h>

#include "cuda/sm90_streamk.h"
#include "harness.h"

/* Every CTA's items, in order: items[b][0 .. n[b]-1]. */
typedef struct sk_work {
  int ctas;
  int *n;
  sm90_sk_item **items;
} sk_work;

static int sk_collect(const sm90_sk_plan *p, sk_work *w) {
  w->ctas = p->ctas;
  w->n = (int *)calloc((size_t)p->ctas, sizeof(int));
  w->items = (sm90_sk_item **)calloc((size_t)p->ctas, sizeof(sm90_sk_item *));
  if (!w->n || !w->items) return 0;
  for (int b = 0; b < p->ctas; b++) {
    int cap = 8;
    w->items[b] = (sm90_sk_item *)malloc(sizeof(sm90_sk_item) * (size_t)cap);
    if (!w->items[b]) return 0;
    sm90_sk_item it;
    while (sm90_sk_item_of(p, b, w->n[b], &it)) {
      if (w->n[b] == cap) {
        cap *= 2;
        sm90_sk_item *q = (sm90_sk_item *)realloc(w->items[b], sizeof(sm90_sk_item) * (size_t)cap);
        if (!q) return 0;
        w->items[b] = q;
      }
      w->items[b][w->n[b]++] = it;
      if (w->n[b] > p->tiles + 2) return 0; /* runaway enumeration */
    }
  }
  return 1;
}

static void sk_free(sk_work *w) {
  for (int b = 0; w->items && b < w->ctas; b++) free(w->items[b]);
  free(w->items);
  free(w->n);
}

/* The checks for one (tiles, kblocks, ctas); 0 and a message on the first failure. The protocol runs
 * twice: the CTAs taking turns in index order one item each, then in reverse order each as far as it
 * can go (it must finish either way). */
static int sk_check(int tiles, int kblocks, int ctas, char *msg, size_t len) {
  const sm90_sk_plan p = sm90_sk_make(tiles, kblocks, ctas);
  if (p.units < 0 || p.units > ctas || p.sk_tiles < 0 || p.sk_tiles > tiles) {
    snprintf(msg, len, "plan out of range: units %d sk_tiles %d", p.units, p.sk_tiles);
    return 0;
  }
  /* unit starts: from 0 to the end, never decreasing */
  for (int u = 0; u < p.units; u++)
    if (sm90_sk_unit_start(&p, u) > sm90_sk_unit_start(&p, u + 1)) {
      snprintf(msg, len, "unit %d starts after unit %d", u, u + 1);
      return 0;
    }
  if (p.units && (sm90_sk_unit_start(&p, 0) != 0 || sm90_sk_unit_start(&p, p.units) != (int64_t)p.sk_tiles * kblocks)) {
    snprintf(msg, len, "units cover [%lld, %lld) of %lld iterations", (long long)sm90_sk_unit_start(&p, 0),
             (long long)sm90_sk_unit_start(&p, p.units), (long long)p.sk_tiles * kblocks);
    return 0;
  }
  sk_work w;
  memset(&w, 0, sizeof w);
  int ok = sk_collect(&p, &w);
  if (!ok) snprintf(msg, len, "enumeration failed (allocation or runaway)");
  unsigned char *cover = ok ? (unsigned char *)calloc((size_t)tiles * (size_t)kblocks, 1) : NULL;
  int *epi = ok ? (int *)calloc((size_t)tiles, sizeof(int)) : NULL;
  if (ok && (!cover || !epi)) {
    snprintf(msg, len, "allocation");
    ok = 0;
  }
  for (int b = 0; ok && b < ctas; b++)
    for (int i = 0; ok && i < w.n[b]; i++) {
      const sm90_sk_item *it = &w.items[b][i];
      if (it->tile < 0 || it->tile >= tiles || it->k0 < 0 || it->k1 > kblocks || it->k0 >= it->k1 ||
          it->role != sm90_sk_role(it->k0, it->k1, kblocks)) {
        snprintf(msg, len, "CTA %d item %d: tile %d K [%d, %d) role %d", b, i, it->tile, it->k0, it->k1, it->role);
        ok = 0;
        break;
      }
      if (kblocks >= 2 * SK_MIN_SPLIT && it->k1 - it->k0 < SK_MIN_SPLIT && it->role != 0) {
        snprintf(msg, len, "CTA %d item %d: a split of %d K-blocks (tile %d)", b, i, it->k1 - it->k0, it->tile);
        ok = 0;
        break;
      }
      /* the storing split first in its CTA's order, a middle split its unit's only item, the final
       * split its unit's last (only whole tiles after it) */
      if ((it->role == 1 && i != 0) || (it->role == 2 && i != 0) ||
          (it->role == 3 && i + 1 < w.n[b] && w.items[b][i + 1].tile < p.sk_tiles)) {
        snprintf(msg, len, "CTA %d item %d: role %d out of place", b, i, it->role);
        ok = 0;
        break;
      }
      for (int k = it->k0; k < it->k1; k++) cover[(size_t)it->tile * kblocks + k]++;
      epi[it->tile] += it->role == 0 || it->role == 3;
    }
  /* slots (sm90_sk_slot): every storing split (roles 1, 2) has one below sm90_sk_slots; with even splits
   * each tile's per_tile - 1 storing splits hold the tile's slots tile (per_tile - 1) + 0 .. per_tile - 2,
   * one each (the final split adds exactly those); with the continuous cut the tile's one slot */
  const int64_t nslots = ok ? sm90_sk_slots(&p) : 0;
  unsigned char *slot_used = ok ? (unsigned char *)calloc((size_t)(nslots > 0 ? nslots : 1), 1) : NULL;
  if (ok && !slot_used) {
    snprintf(msg, len, "allocation");
    ok = 0;
  }
  for (int b = 0; ok && b < ctas; b++)
    for (int i = 0; ok && i < w.n[b]; i++) {
      const sm90_sk_item *it = &w.items[b][i];
      if (it->role != 1 && it->role != 2) continue;
      const int sl = sm90_sk_slot(&p, it->tile, it->k0);
      const int lo = p.per_tile > 0 ? it->tile * (p.per_tile - 1) : it->tile;
      const int hi = p.per_tile > 0 ? lo + p.per_tile - 1 : lo + 1;
      if (sl < lo || sl >= hi || sl >= nslots || (p.per_tile > 0 && slot_used[sl])) {
        snprintf(msg, len, "CTA %d item %d (tile %d K [%d, %d)): slot %d, the tile's are [%d, %d) of %lld%s", b, i,
                 it->tile, it->k0, it->k1, sl, lo, hi, (long long)nslots,
                 sl >= lo && sl < hi && sl < nslots ? " (taken twice)" : "");
        ok = 0;
      } else
        slot_used[sl] = 1;
    }
  for (int64_t sl = 0; ok && p.per_tile > 0 && sl < nslots; sl++)
    if (!slot_used[sl]) {
      snprintf(msg, len, "slot %lld: no split stores there (the final split would add garbage)", (long long)sl);
      ok = 0;
    }
  free(slot_used);
  /* sm90_sk_epi_walk: the same epilogue tiles in the same order as the items of roles 0 and 3 */
  for (int b = 0; ok && b < ctas; b++) {
    int hi, lo, dp, j = 0;
    sm90_sk_epi_walk(&p, b, &hi, &lo, &dp);
    for (int i = 0; ok && i < w.n[b]; i++) {
      const sm90_sk_item *it = &w.items[b][i];
      if (it->role != 0 && it->role != 3) continue;
      int t = -1;
      if (hi >= lo) t = hi--;
      else if (dp < tiles) {
        t = dp;
        dp += ctas;
      }
      if (t != it->tile) {
        snprintf(msg, len, "CTA %d: epilogue %d on tile %d, the walk says %d", b, j, it->tile, t);
        ok = 0;
      }
      j++;
    }
    if (ok && (hi >= lo || dp < tiles)) {
      snprintf(msg, len, "CTA %d: the walk has more epilogues than its %d", b, j);
      ok = 0;
    }
  }
  for (int t = 0; ok && t < tiles; t++) {
    if (epi[t] != 1) {
      snprintf(msg, len, "tile %d: %d epilogues", t, epi[t]);
      ok = 0;
    }
    for (int k = 0; ok && k < kblocks; k++)
      if (cover[(size_t)t * kblocks + k] != 1) {
        snprintf(msg, len, "tile %d K-block %d done %d times", t, k, cover[(size_t)t * kblocks + k]);
        ok = 0;
      }
  }
  /* the protocol, in both turn orders */
  int *lock = ok ? (int *)calloc((size_t)tiles, sizeof(int)) : NULL;
  int *pos = ok ? (int *)calloc((size_t)ctas, sizeof(int)) : NULL;
  if (ok && (!lock || !pos)) {
    snprintf(msg, len, "allocation");
    ok = 0;
  }
  for (int order = 0; ok && order < 2; order++) {
    memset(lock, 0, sizeof(int) * (size_t)tiles);
    memset(pos, 0, sizeof(int) * (size_t)ctas);
    int left = 0;
    for (int b = 0; b < ctas; b++) left += w.n[b];
    while (ok && left > 0) {
      int progress = 0;
      for (int bi = 0; bi < ctas; bi++) {
        const int b = order ? ctas - 1 - bi : bi;
        while (pos[b] < w.n[b]) {
          const sm90_sk_item *it = &w.items[b][pos[b]];
          /* the lock counts stored K-blocks: with even splits only the final split waits (for all of
           * them), with the continuous cut every later split waits for the ones before it */
          if (it->role == 3 || (it->role == 2 && p.per_tile <= 0)) {
            if (lock[it->tile] != it->k0) break; /* waits */
          } else if (it->role == 1 && p.per_tile <= 0 && lock[it->tile] != 0) {
            snprintf(msg, len, "tile %d: a first split found the lock at %d", it->tile, lock[it->tile]);
            ok = 0;
            break;
          }
          if (it->role == 3) lock[it->tile] = 0; /* the final split resets it */
          else if (it->role != 0) lock[it->tile] += it->k1 - it->k0;
          pos[b]++;
          left--;
          progress = 1;
          if (order == 0) break; /* one item per turn in index order; as far as it goes in reverse */
        }
        if (!ok) break;
      }
      if (ok && !progress) {
        snprintf(msg, len, "deadlock (turn order %d) with %d items left", order, left);
        ok = 0;
      }
    }
    for (int t = 0; ok && t < tiles; t++)
      if (lock[t] != 0) {
        snprintf(msg, len, "tile %d: lock left at %d", t, lock[t]);
        ok = 0;
      }
  }
  free(lock);
  free(pos);
  free(cover);
  free(epi);
  sk_free(&w);
  return ok;
}

W8A8_TEST(streamk_schedule_sweep) {
  static const int kbs[] = {1, 2, 7, 8, 9, 15, 16, 17, 24, 31, 32, 33, 56, 64, 96, 112, 128};
  static const int grids[] = {132, 114, 78, 16, 5, 1};
  char msg[256];
  long cases = 0, streamk = 0;
  for (int gi = 0; gi < (int)(sizeof grids / sizeof grids[0]); gi++)
    for (int ki = 0; ki < (int)(sizeof kbs / sizeof kbs[0]); ki++)
      for (int tiles = 1; tiles <= 3 * grids[gi] + 7; tiles += tiles < 40 ? 1 : 3) {
        cases++;
        streamk += sm90_sk_make(tiles, kbs[ki], grids[gi]).units > 0;
        REQUIRE(sk_check(tiles, kbs[ki], grids[gi], msg, sizeof msg), "tiles %d kblocks %d ctas %d: %s", tiles,
                kbs[ki], grids[gi], msg);
      }
  /* not vacuous: most of the sweep's cases with a partial last wave take stream-K */
  CHECK(streamk > cases / 10, "only %ld of %ld cases took stream-K", streamk, cases);
}

/* The decisions on the shapes that motivate it (132 SMs): 70b-qkv-tp4 at M = 512 (80 tiles of
 * 128 x 128, 64 K-blocks) takes it; 128 tiles (97% of a wave), 264 (two whole waves) and tiles of
 * 8 K-blocks do not; a long tail after two waves turns one wave plus the tail into stream-K. */
W8A8_TEST(streamk_schedule_decisions) {
  sm90_sk_plan p = sm90_sk_make(80, 64, 132);
  CHECK(p.sk_tiles == 80 && p.units == 132, "80 tiles: sk_tiles %d units %d", p.sk_tiles, p.units);
  CHECK(sm90_sk_make(128, 64, 132).units == 0, "128 tiles took stream-K");
  CHECK(sm90_sk_make(264, 64, 132).units == 0, "two whole waves took stream-K");
  CHECK(sm90_sk_make(80, 8, 132).units == 0, "8 K-blocks per tile took stream-K");
  p = sm90_sk_make(2 * 132 + 20, 64, 132);
  CHECK(p.sk_tiles == 132 + 20 && p.units == 132, "284 tiles: sk_tiles %d units %d", p.sk_tiles, p.units);
  /* 80 x 64 iterations over 132 units: 38 or 39 each before snapping */
  p = sm90_sk_make(80, 64, 132);
  CHECK(p.base == 38 && p.extra == 80 * 64 - 132 * 38 && p.per_tile == 0, "base %lld extra %d per_tile %d",
        (long long)p.base, p.extra, p.per_tile);
  /* 64 tiles of 32 K-blocks (8b-o at M = 256): even halves, 128 units of 16; 40 tiles of 64 (70b-qkv-tp4
   * at M = 256): 3 per tile (21 / 21 / 22); 3 tiles of 17: 2 per tile (the 8-block minimum) */
  p = sm90_sk_make(64, 32, 132);
  CHECK(p.per_tile == 2 && p.units == 128 && sm90_sk_unit_start(&p, 1) == 16 && sm90_sk_unit_start(&p, 2) == 32,
        "64 x 32: per_tile %d units %d", p.per_tile, p.units);
  p = sm90_sk_make(40, 64, 132);
  CHECK(p.per_tile == 3 && p.units == 120 && sm90_sk_unit_start(&p, 1) == 21 && sm90_sk_unit_start(&p, 2) == 42 &&
            sm90_sk_unit_start(&p, 3) == 64,
        "40 x 64: per_tile %d units %d", p.per_tile, p.units);
  p = sm90_sk_make(3, 17, 132);
  CHECK(p.per_tile == 2 && p.units == 6, "3 x 17: per_tile %d units %d", p.per_tile, p.units);
}
