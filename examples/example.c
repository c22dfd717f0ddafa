/* example.c — the smallest complete use of libw8a8, built outside the tree:
 *
 *   cc -std=c11 example.c $(pkg-config --cflags --libs w8a8) -o example && ./example
 *
 * A linear layer y = x . W^T in int8: the activations x [M,K] are quantized per token
 * (one scale per row, computed on the fly), the weights W [N,K] per output channel
 * (W's rows are B's columns, so W itself is the column-major B), then one scaled GEMM
 * dequantizes in its epilogue. The result is compared with the fp32 product. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <w8a8.h>

#define M 16
#define K 256
#define N 64

#define TRY(call)                                                                         \
  do {                                                                                    \
    w8a8_status s_ = (call);                                                              \
    if (s_ != W8A8_SUCCESS) {                                                             \
      fprintf(stderr, "%s failed: %s (%s)\n", #call, w8a8_status_name(s_), w8a8_last_error()); \
      return 1;                                                                           \
    }                                                                                     \
  } while (0)

int main(void) {
  static float x[M * K], w[N * K], y[M * N];
  static int8_t xq[M * K], wq[N * K];
  static float sx[M], sw[N];
  srand(1);
  for (int i = 0; i < M * K; i++) x[i] = (float)rand() / RAND_MAX * 2 - 1;
  for (int i = 0; i < N * K; i++) w[i] = ((float)rand() / RAND_MAX * 2 - 1) * 0.05f;

  printf("libw8a8 %s (header %d)\n", w8a8_version_string(), W8A8_VERSION);
  w8a8_handle *h = NULL;
  TRY(w8a8_create(&h, W8A8_DEVICE_CPU, 0)); /* host buffers: a CPU handle */

  /* per-token activations and per-channel weights: both "one scale per row" */
  w8a8_matrix X = w8a8_matrix_make(W8A8_DTYPE_FP32, W8A8_ROW_MAJOR, M, K, K, x);
  w8a8_matrix Xq = w8a8_matrix_make(W8A8_DTYPE_INT8, W8A8_ROW_MAJOR, M, K, K, xq);
  w8a8_vector SX = w8a8_vector_make(W8A8_DTYPE_FP32, M, sx);
  TRY(w8a8_quantize(h, &X, &Xq, W8A8_QUANT_DYNAMIC_PER_TOKEN, &SX, NULL, NULL));
  w8a8_matrix W = w8a8_matrix_make(W8A8_DTYPE_FP32, W8A8_ROW_MAJOR, N, K, K, w);
  w8a8_matrix Wq = w8a8_matrix_make(W8A8_DTYPE_INT8, W8A8_ROW_MAJOR, N, K, K, wq);
  w8a8_vector SW = w8a8_vector_make(W8A8_DTYPE_FP32, N, sw);
  TRY(w8a8_quantize(h, &W, &Wq, W8A8_QUANT_DYNAMIC_PER_TOKEN, &SW, NULL, NULL));

  /* y = sx * sw * (xq . wq^T): B is [K,N] column-major, i.e. wq as stored */
  w8a8_matrix B = w8a8_matrix_make(W8A8_DTYPE_INT8, W8A8_COL_MAJOR, K, N, K, wq);
  w8a8_matrix Y = w8a8_matrix_make(W8A8_DTYPE_FP32, W8A8_ROW_MAJOR, M, N, N, y);
  TRY(w8a8_scaled_mm(h, &Xq, &B, &SX, &SW, NULL, NULL, &Y));

  double err = 0, ref = 0;
  for (int m = 0; m < M; m++)
    for (int n = 0; n < N; n++) {
      double d = 0;
      for (int k = 0; k < K; k++) d += (double)x[m * K + k] * w[n * K + k];
      err += (y[m * N + n] - d) * (y[m * N + n] - d);
      ref += d * d;
    }
  double rel = sqrt(err / ref);
  printf("y[0,0] = %.5f; relative error of the int8 layer vs fp32: %.4f\n", y[0], rel);
  TRY(w8a8_destroy(h));
  return rel < 0.02 ? 0 : 1; /* int8 per-token x per-channel: about 1% on this data */
}
