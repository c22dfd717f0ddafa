/* status.c — status strings, the per-thread last-error message, the handle registry. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

const char *w8a8_status_string(w8a8_status status) {
  switch (status) {
#define W8A8_X_STR(name, value, text) \
  case name:                          \
    return text;
    W8A8_STATUS_LIST(W8A8_X_STR)
#undef W8A8_X_STR
    default:
      return "unknown status";
  }
}

const char *w8a8_status_name(w8a8_status status) {
  switch (status) {
#define W8A8_X_NAME(name, value, text) \
  case name:                           \
    return #name;
    W8A8_STATUS_LIST(W8A8_X_NAME)
#undef W8A8_X_NAME
    default:
      return "W8A8_STATUS_UNKNOWN";
  }
}

/* One message per thread; long enough for any of ours. */
static _Thread_local char tls_error[512];

const char *w8a8_last_error(void) { return tls_error; }

void w8a8_clear_error(void) { tls_error[0] = '\0'; }

w8a8_status w8a8_verr(w8a8_status status, const char *fmt, va_list ap) {
  vsnprintf(tls_error, sizeof tls_error, fmt, ap);
  return status;
}

w8a8_status w8a8_err(w8a8_status status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  w8a8_verr(status, fmt, ap);
  va_end(ap);
  return status;
}

/* ---- registry --------------------------------------------------------------
 * A small open array of live objects under a mutex. Handles and communicators
 * are created rarely and looked up once per call; a linear scan over a few
 * entries costs nanoseconds next to any GEMM. */
static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static const void **reg_items;
static size_t reg_count, reg_cap;

bool w8a8_registry_add(const void *obj) {
  pthread_mutex_lock(&reg_lock);
  if (reg_count == reg_cap) {
    size_t cap = reg_cap ? reg_cap * 2 : 16;
    const void **items = realloc((void *)reg_items, cap * sizeof *items);
    if (!items) { /* keep the old array; the caller reports out of memory */
      pthread_mutex_unlock(&reg_lock);
      return false;
    }
    reg_items = items;
    reg_cap = cap;
  }
  reg_items[reg_count++] = obj;
  pthread_mutex_unlock(&reg_lock);
  return true;
}

void w8a8_registry_remove(const void *obj) {
  pthread_mutex_lock(&reg_lock);
  for (size_t i = 0; i < reg_count; i++) {
    if (reg_items[i] == obj) {
      reg_items[i] = reg_items[--reg_count];
      break;
    }
  }
  pthread_mutex_unlock(&reg_lock);
}

bool w8a8_registry_contains(const void *obj) {
  bool found = false;
  if (!obj) return false;
  pthread_mutex_lock(&reg_lock);
  for (size_t i = 0; i < reg_count && !found; i++) found = reg_items[i] == obj;
  pthread_mutex_unlock(&reg_lock);
  return found;
}

w8a8_status w8a8_check_handle(const char *fn, const w8a8_handle *h) {
  if (!h) return w8a8_err(W8A8_ERROR_INVALID_HANDLE, "%s: handle is NULL; expected a handle from w8a8_create", fn);
  if (!w8a8_registry_contains(h))
    return w8a8_err(W8A8_ERROR_INVALID_HANDLE,
                    "%s: handle %p is not a live w8a8 handle (destroyed, or never created by w8a8_create)", fn,
                    (const void *)h);
  if (h->magic != W8A8_HANDLE_MAGIC)
    return w8a8_err(W8A8_ERROR_INVALID_HANDLE, "%s: handle %p is not a w8a8_handle (wrong magic 0x%08x)", fn,
                    (const void *)h, h->magic);
  return W8A8_SUCCESS;
}
