/* test_smoke.c — the library loads, a handle works, one small GEMM matches by hand. */
#include <string.h>

#include "harness.h"

W8A8_TEST(smoke_version_and_strings) {
  CHECK(w8a8_version() == W8A8_VERSION, "runtime %d vs header %d", w8a8_version(), W8A8_VERSION);
  CHECK(strstr(w8a8_version_string(), "0.1.0") != NULL, "%s", w8a8_version_string());
  for (int s = 0; s < W8A8_STATUS_COUNT; s++)
    CHECK(strcmp(w8a8_status_string((w8a8_status)s), "unknown status") != 0, "status %d has no string", s);
  CHECK(strcmp(w8a8_status_string((w8a8_status)999), "unknown status") == 0, "out of range");
}

W8A8_TEST(smoke_int8_2x2_by_hand) {
  w8a8_handle *h = NULL;
  REQUIRE_OK(w8a8_create(&h, W8A8_DEVICE_CPU, 0));
  int8_t a[4] = {1, 2, 3, -4};        /* [[1,2],[3,-4]] row-major */
  int8_t b[4] = {5, 6, -128, 127};    /* columns (5,6) and (-128,127) */
  float sa = 0.5f, sb[2] = {2.0f, 1.0f};
  float out[4] = {-1, -1, -1, -1};
  w8a8_matrix A = w8a8_matrix_make(W8A8_DTYPE_INT8, W8A8_ROW_MAJOR, 2, 2, 2, a);
  w8a8_matrix B = w8a8_matrix_make(W8A8_DTYPE_INT8, W8A8_COL_MAJOR, 2, 2, 2, b);
  w8a8_matrix O = w8a8_matrix_make(W8A8_DTYPE_FP32, W8A8_ROW_MAJOR, 2, 2, 2, out);
  w8a8_vector SA = w8a8_vector_make(W8A8_DTYPE_FP32, 1, &sa), SB = w8a8_vector_make(W8A8_DTYPE_FP32, 2, sb);
  REQUIRE_OK(w8a8_scaled_mm(h, &A, &B, &SA, &SB, NULL, NULL, &O));
  /* row0: 1*5+2*6=17 -> 17*.5*2=17 ; 1*-128+2*127=126 -> 63 ; row1: 15-24=-9 -> -9 ; -384-508=-892 -> -446 */
  CHECK(out[0] == 17.0f && out[1] == 63.0f && out[2] == -9.0f && out[3] == -446.0f, "%g %g %g %g", out[0], out[1],
        out[2], out[3]);
  REQUIRE_OK(w8a8_destroy(h));
}

/* K == 0 spans no bytes, so any ld is valid; backends must not form row pointers with it
 * (the fuzzer found m * INT64_MAX in the reference: UB caught by UBSan in the asan build). */
W8A8_TEST(smoke_k0_with_huge_ld) {
  w8a8_handle *h = NULL;
  REQUIRE_OK(w8a8_create(&h, W8A8_DEVICE_CPU, 0));
  for (int kernel = W8A8_KERNEL_AUTO; kernel <= W8A8_KERNEL_GENERIC; kernel++) {
    REQUIRE_OK(w8a8_set_kernel(h, (w8a8_kernel)kernel));
    int8_t dummy[1] = {0};
    float sa = 1.0f, sb = 1.0f, out[6], x[3] = {0};
    for (int i = 0; i < 6; i++) out[i] = -7.0f;
    w8a8_matrix A = w8a8_matrix_make(W8A8_DTYPE_INT8, W8A8_ROW_MAJOR, 2, 0, INT64_MAX, dummy);
    w8a8_matrix B = w8a8_matrix_make(W8A8_DTYPE_INT8, W8A8_COL_MAJOR, 0, 3, INT64_MAX, dummy);
    w8a8_matrix O = w8a8_matrix_make(W8A8_DTYPE_FP32, W8A8_ROW_MAJOR, 2, 3, 3, out);
    w8a8_vector SA = w8a8_vector_make(W8A8_DTYPE_FP32, 1, &sa), SB = w8a8_vector_make(W8A8_DTYPE_FP32, 1, &sb);
    REQUIRE_OK(w8a8_scaled_mm(h, &A, &B, &SA, &SB, NULL, NULL, &O));
    for (int i = 0; i < 6; i++) CHECK(out[i] == 0.0f, "kernel %d: out[%d] = %g, expected 0 (K = 0)", kernel, i, out[i]);
    int32_t adj[3] = {5, 5, 5};
    w8a8_vector ADJ = w8a8_vector_make(W8A8_DTYPE_INT32, 3, adj);
    REQUIRE_OK(w8a8_colsum(h, &B, &ADJ));
    CHECK(adj[0] == 0 && adj[1] == 0 && adj[2] == 0, "colsum of K = 0: %d %d %d", adj[0], adj[1], adj[2]);
    int8_t q[1];
    float s[3];
    w8a8_matrix X = w8a8_matrix_make(W8A8_DTYPE_FP32, W8A8_ROW_MAJOR, 3, 0, INT64_MAX, x);
    w8a8_matrix Q = w8a8_matrix_make(W8A8_DTYPE_INT8, W8A8_ROW_MAJOR, 3, 0, INT64_MAX, q);
    w8a8_vector S = w8a8_vector_make(W8A8_DTYPE_FP32, 3, s);
    REQUIRE_OK(w8a8_quantize(h, &X, &Q, W8A8_QUANT_DYNAMIC_PER_TOKEN, &S, NULL, NULL));
  }
  REQUIRE_OK(w8a8_destroy(h));
}
