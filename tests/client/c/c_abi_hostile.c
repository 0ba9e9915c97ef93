/* The C ABI used as a careless or hostile caller would (issue 29): NULL pointers with sizes,
 * ranges that wrap, handles released twice, used after release, made up or of another type,
 * allocations of SIZE_MAX bytes, and many threads failing on one client at once, each of which
 * must read its own op's message. Every step must end in a status and a message, never a crash.
 * Part of c_abi_demo (called from its main), so that it runs against the same daemon. */
#define _POSIX_C_SOURCE 200809L

#include <gdrstore/gdrstore.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "c_abi_steps.h"

static int has(const char* text, const char* part) {
  return text != NULL && strstr(text, part) != NULL;
}

/* ---- many threads failing on one client ---- */

enum { kThreads = 8, kOpsPerThread = 40 };

struct thread_args {
  gdrstore_client* client;
  gdrstore_buffer* buffer;
  int index;
  int wrong;      /* failures whose message named another op */
  int not_found;  /* failures that came back NOT_FOUND, as each must */
};

static void* fail_many(void* p) {
  struct thread_args* a = p;
  for (int i = 0; i < kOpsPerThread; ++i) {
    char volume[64];
    snprintf(volume, sizeof(volume), "missing-t%d-op%d", a->index, i);
    const gdrstore_status st = gdrstore_get(a->client, volume, 0, 16, a->buffer, 0, NULL);
    /* The message of the call this thread just made, whatever the other threads do. */
    if (st == GDRSTORE_NOT_FOUND) ++a->not_found;
    const char* msg = gdrstore_error(a->client);
    if (!has(msg, volume)) {
      if (a->wrong == 0) printf("  thread %d op %d read: %s\n", a->index, i, msg);
      ++a->wrong;
    }
  }
  return NULL;
}

static void threads_steps(gdrstore_client* client, gdrstore_buffer* buffer) {
  pthread_t threads[kThreads];
  struct thread_args args[kThreads];
  int started = 0;
  for (int t = 0; t < kThreads; ++t) {
    args[t] = (struct thread_args){client, buffer, t, 0, 0};
    if (pthread_create(&threads[t], NULL, fail_many, &args[t]) == 0) ++started;
  }
  int wrong = 0, not_found = 0;
  for (int t = 0; t < started; ++t) {
    pthread_join(threads[t], NULL);
    wrong += args[t].wrong;
    not_found += args[t].not_found;
  }
  char why[96];
  snprintf(why, sizeof(why), "%d of %d messages named another thread's op", wrong,
           kThreads * kOpsPerThread);
  check(started == kThreads && not_found == kThreads * kOpsPerThread && wrong == 0,
        "8 threads failing on one client each read their own op's message", why);
}

/* ---- pointers, sizes and handles ---- */

void hostile_steps(gdrstore_client* client, const char* volume) {
  gdrstore_buffer* b = NULL;
  gdrstore_status st = gdrstore_alloc_host(client, 64 << 10, &b);
  check(st == GDRSTORE_OK, "hostile: buffer", gdrstore_error(client));
  if (st != GDRSTORE_OK) return;

  /* NULL with a size: refused, naming the pointer; with no bytes it is nothing to copy. */
  st = gdrstore_buffer_copy_in(b, 0, NULL, 16);
  check(st == GDRSTORE_INVALID_ARGUMENT && has(gdrstore_error(b), "src"),
        "copy_in from NULL refused", gdrstore_error(b));
  st = gdrstore_buffer_copy_out(b, 0, NULL, 16);
  check(st == GDRSTORE_INVALID_ARGUMENT && has(gdrstore_error(b), "dst"),
        "copy_out to NULL refused", gdrstore_error(b));
  check(gdrstore_buffer_copy_in(b, 0, NULL, 0) == GDRSTORE_OK, "copy_in of 0 bytes from NULL",
        gdrstore_error(b));
  char small[16];
  st = gdrstore_buffer_copy_out(b, SIZE_MAX - 4, small, sizeof(small));
  check(st == GDRSTORE_OUT_OF_RANGE, "copy_out at an offset that wraps", gdrstore_error(b));

  /* Ranges that run past the end of the address space. */
  gdrstore_buffer* wild = NULL;
  st = gdrstore_register_host(client, (void*)(UINTPTR_MAX - 100), 4096, &wild);
  check(st == GDRSTORE_INVALID_ARGUMENT && wild == NULL, "register_host range that wraps",
        gdrstore_error(client));
  st = gdrstore_register_gpu(client, UINT64_MAX - 100, 4096, &wild);
  check(st == GDRSTORE_INVALID_ARGUMENT && wild == NULL, "register_gpu range that wraps",
        gdrstore_error(client));
  st = gdrstore_verify(b, 0, 4096, volume, UINT64_MAX - 100, NULL);
  check(st == GDRSTORE_INVALID_ARGUMENT, "verify against a volume range that wraps",
        gdrstore_error(b));
  st = gdrstore_pattern_check(small, sizeof(small), volume, UINT64_MAX - 4, NULL);
  check(st == GDRSTORE_INVALID_ARGUMENT && has(gdrstore_error(NULL), "2^64"),
        "pattern_check against a volume range that wraps", gdrstore_error(NULL));
  st = gdrstore_pattern_check(NULL, 16, volume, 0, NULL);
  check(st == GDRSTORE_INVALID_ARGUMENT, "pattern_check of NULL", gdrstore_error(NULL));

  /* SIZE_MAX rounds to no pages at all unless the rounding is checked. */
  gdrstore_buffer* huge = NULL;
  st = gdrstore_alloc_host(client, SIZE_MAX, &huge);
  check(st == GDRSTORE_RESOURCE_EXHAUSTED && huge == NULL, "alloc_host(SIZE_MAX) refused",
        gdrstore_error(client));

  /* Out pointers. */
  check(gdrstore_alloc_host(client, 4096, NULL) == GDRSTORE_INVALID_ARGUMENT,
        "alloc_host without an out pointer", gdrstore_error(client));
  check(gdrstore_info_json(client, NULL) == GDRSTORE_INVALID_ARGUMENT,
        "info_json without an out pointer", gdrstore_error(client));
  gdrstore_stream* s = NULL;
  st = gdrstore_stream_open(client, &s);
  check(st == GDRSTORE_OK, "hostile: stream", gdrstore_error(client));
  if (st == GDRSTORE_OK) {
    gdrstore_completion c[1];
    check(gdrstore_poll(s, c, 1, 0, NULL) == GDRSTORE_INVALID_ARGUMENT,
          "poll without a count", gdrstore_error(s));
    size_t got = 0;
    check(gdrstore_poll(s, NULL, 4, 0, &got) == GDRSTORE_INVALID_ARGUMENT,
          "poll into NULL completions", gdrstore_error(s));
    check(gdrstore_stream_close(s) == GDRSTORE_OK, "hostile: stream close", gdrstore_error(s));
    /* Closed: refused, never a use of freed memory. */
    check(gdrstore_stream_close(s) == GDRSTORE_INVALID_ARGUMENT &&
              has(gdrstore_error(s), "not a live handle"),
          "stream closed twice", gdrstore_error(s));
    check(gdrstore_stream_get(s, volume, 0, 16, b, 0, 1) == GDRSTORE_INVALID_ARGUMENT,
          "submit on a closed stream", gdrstore_error(s));
    check(gdrstore_stream_outstanding(s) == 0, "outstanding of a closed stream", "");
  }

  /* Released handles: refused by every call, releasing again does nothing. */
  gdrstore_buffer* gone = NULL;
  st = gdrstore_alloc_host(client, 4096, &gone);
  check(st == GDRSTORE_OK, "hostile: second buffer", gdrstore_error(client));
  gdrstore_buffer_release(gone);
  gdrstore_buffer_release(gone);
  check(1, "buffer released twice", "");
  st = gdrstore_get(client, volume, 0, 16, gone, 0, NULL);
  check(st == GDRSTORE_INVALID_ARGUMENT && has(gdrstore_error(client), "buffer handle"),
        "get into a released buffer", gdrstore_error(client));
  st = gdrstore_buffer_copy_in(gone, 0, small, sizeof(small));
  check(st == GDRSTORE_INVALID_ARGUMENT && has(gdrstore_error(gone), "not a live handle"),
        "copy_in to a released buffer", gdrstore_error(gone));
  gdrstore_buffer_info info;
  memset(&info, 0xAB, sizeof(info));
  gdrstore_buffer_get_info(gone, &info);
  check(info.host == NULL && info.size == 0 && info.gpu_ordinal == -1,
        "info of a released buffer is empty", "");
  /* A handle of another type, and one the library never made. */
  st = gdrstore_get(client, volume, 0, 16, (gdrstore_buffer*)client, 0, NULL);
  check(st == GDRSTORE_INVALID_ARGUMENT && has(gdrstore_error(client), "is a client"),
        "a client passed as a buffer", gdrstore_error(client));
  gdrstore_client* made_up = (gdrstore_client*)(uintptr_t)0x7e57ab1e;
  st = gdrstore_get(made_up, volume, 0, 16, b, 0, NULL);
  check(st == GDRSTORE_INVALID_ARGUMENT && has(gdrstore_error(made_up), "not a live handle"),
        "a made-up client handle", gdrstore_error(made_up));
  gdrstore_client_close(made_up);
  gdrstore_buffer_release((gdrstore_buffer*)client); /* the wrong type: not released */
  check(gdrstore_get(client, volume, 0, 16, b, 0, NULL) == GDRSTORE_OK,
        "the client survives a release as a buffer", gdrstore_error(client));

  threads_steps(client, b);

  gdrstore_buffer_release(b);
}

void hostile_cluster_steps(gdrstore_cluster* cluster, const char* volume) {
  gdrstore_cluster_buffer* huge = NULL;
  gdrstore_status st = gdrstore_cluster_alloc_host(cluster, SIZE_MAX, &huge);
  check(st == GDRSTORE_RESOURCE_EXHAUSTED && huge == NULL, "cluster_alloc_host(SIZE_MAX) refused",
        gdrstore_error(cluster));
  st = gdrstore_cluster_alloc_host(cluster, SIZE_MAX - 100, &huge);
  check(st == GDRSTORE_RESOURCE_EXHAUSTED && huge == NULL,
        "cluster_alloc_host(SIZE_MAX - 100) refused", gdrstore_error(cluster));
  st = gdrstore_cluster_register_host(cluster, (void*)(UINTPTR_MAX - 100), 4096, &huge);
  check(st == GDRSTORE_INVALID_ARGUMENT && huge == NULL, "cluster_register_host range that wraps",
        gdrstore_error(cluster));
  gdrstore_cluster_buffer* b = NULL;
  st = gdrstore_cluster_alloc_host(cluster, 4096, &b);
  check(st == GDRSTORE_OK, "hostile: cluster buffer", gdrstore_error(cluster));
  if (st != GDRSTORE_OK) return;
  gdrstore_cluster_buffer_release(b);
  gdrstore_cluster_buffer_release(b);
  check(gdrstore_cluster_buffer_data(b) == NULL && gdrstore_cluster_buffer_size(b) == 0,
        "a released cluster buffer has no memory", "");
  st = gdrstore_cluster_get(cluster, volume, 0, 16, b, 0);
  check(st == GDRSTORE_INVALID_ARGUMENT && has(gdrstore_error(cluster), "cluster buffer handle"),
        "cluster get into a released buffer", gdrstore_error(cluster));
}
