/* comm_nccl_stub.c — the GPU communicator's entry points until the GPU transport lands
 * (issue 6 replaces this file with the NCCL implementation). Each says what is missing. */
#include "tp_internal.h"

static w8a8_status not_yet(const char *fn) {
#ifdef W8A8_HAVE_NCCL
  return w8a8_err(W8A8_ERROR_NOT_BUILT,
                  "%s: the NCCL transport for GPU ranks is not implemented in this version of libw8a8 (CPU ranks: "
                  "w8a8_comm_create_mpi)",
                  fn);
#else
  return w8a8_err(W8A8_ERROR_NOT_BUILT,
                  "%s: libw8a8 was built without NCCL (and the GPU transport is not implemented in this version); "
                  "CPU ranks: w8a8_comm_create_mpi",
                  fn);
#endif
}

w8a8_status w8a8_comm_create_nccl(w8a8_comm **comm, w8a8_handle *handle, void *nccl_comm) {
  (void)handle, (void)nccl_comm;
  w8a8_clear_error();
  if (!comm) return w8a8_err(W8A8_ERROR_NULL_POINTER, "w8a8_comm_create_nccl: comm is NULL");
  return not_yet("w8a8_comm_create_nccl");
}

w8a8_status w8a8_comm_unique_id(w8a8_unique_id *id) {
  w8a8_clear_error();
  if (!id) return w8a8_err(W8A8_ERROR_NULL_POINTER, "w8a8_comm_unique_id: id is NULL");
  return not_yet("w8a8_comm_unique_id");
}

w8a8_status w8a8_comm_create_nccl_id(w8a8_comm **comm, w8a8_handle *handle, const w8a8_unique_id *id, int nranks,
                                     int rank) {
  (void)handle, (void)nranks, (void)rank;
  w8a8_clear_error();
  if (!comm || !id)
    return w8a8_err(W8A8_ERROR_NULL_POINTER, "w8a8_comm_create_nccl_id: %s is NULL", !comm ? "comm" : "id");
  return not_yet("w8a8_comm_create_nccl_id");
}
