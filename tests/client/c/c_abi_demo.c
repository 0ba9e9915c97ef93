/* A C program on the C ABI alone (gdrstore/gdrstore.h, linked against libgdrclient.so): gets
 * into and puts from its own malloc'ed memory, a stream of many ops collected by polling, and
 * the errors a caller has to handle, a one-member cluster from a static members file, and the
 * ABI used carelessly or hostilely (c_abi_hostile.c).
 * Usage: c_abi_demo HOST:PORT VOLUME (at least 32 MiB). Prints one line per step ("ok: ..." or
 * "FAIL: ...") and exits non-zero at the first failure. */
#define _POSIX_C_SOURCE 200809L /* mkstemp */

#include <gdrstore/gdrstore.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "c_abi_steps.h"

static int failures = 0;

void check(int ok, const char* step, const char* why) {
  if (ok) {
    printf("ok: %s\n", step);
  } else {
    printf("FAIL: %s: %s\n", step, why != NULL ? why : "");
    ++failures;
  }
}

/* A cluster of the one daemon, from a members file: its volume is laid out one stripe unit
 * after another, so logical byte k is the daemon's byte k and a plain get proves the put. */
static void cluster_steps(const char* address, const char* volume, gdrstore_client* client) {
  char path[] = "/tmp/gdrstore-c-abi-cluster-XXXXXX";
  const int fd = mkstemp(path);
  FILE* f = fd >= 0 ? fdopen(fd, "w") : NULL;
  check(f != NULL, "members file created", path);
  if (f == NULL) return;
  fprintf(f,
          "{\"members\":[{\"id\":\"m0\",\"address\":\"%s\",\"volumes\":[{\"name\":\"%s\","
          "\"size\":\"33554432\"}]}],\"volumes\":[{\"name\":\"%s\",\"stripe_unit\":\"1048576\","
          "\"members\":[\"m0\"],\"replicas\":1,\"epoch\":\"1\",\"size\":\"33554432\"}]}\n",
          address, volume, volume);
  fclose(f);

  gdrstore_cluster_options co;
  gdrstore_cluster_options_init(&co);
  co.members_file = path;
  gdrstore_cluster* cluster = NULL;
  char error[256];
  gdrstore_status st = gdrstore_cluster_open(&co, &cluster, error, sizeof(error));
  check(st == GDRSTORE_OK, "cluster open (members file)", error);
  if (st != GDRSTORE_OK) {
    unlink(path);
    return;
  }
  const size_t n = (3 << 20) + 7;
  const uint64_t at = (20 << 20) + 5; /* crosses stripe units, unaligned */
  gdrstore_cluster_buffer* cb = NULL;
  st = gdrstore_cluster_alloc_host(cluster, n, &cb);
  check(st == GDRSTORE_OK && gdrstore_cluster_buffer_size(cb) == n, "cluster buffer",
        gdrstore_error(cluster));
  if (st != GDRSTORE_OK) return;
  unsigned char* data = gdrstore_cluster_buffer_data(cb);
  for (size_t i = 0; i < n; ++i) data[i] = (unsigned char)(i * 13 + 5);
  st = gdrstore_cluster_put(cluster, volume, at, n, cb, 0);
  check(st == GDRSTORE_OK, "cluster put", gdrstore_error(cluster));
  unsigned char* direct = malloc(n);
  gdrstore_buffer* db = NULL;
  st = gdrstore_register_host(client, direct, n, &db);
  if (st == GDRSTORE_OK) st = gdrstore_get(client, volume, at, n, db, 0, NULL);
  check(st == GDRSTORE_OK && memcmp(direct, data, n) == 0, "cluster put landed on the member",
        gdrstore_error(client));
  memset(data, 0, n);
  st = gdrstore_cluster_get(cluster, volume, at, n, cb, 0);
  check(st == GDRSTORE_OK && memcmp(direct, data, n) == 0, "cluster get",
        gdrstore_error(cluster));

  char* json = NULL;
  st = gdrstore_cluster_status_json(cluster, &json);
  check(st == GDRSTORE_OK && json != NULL && strstr(json, "\"id\":\"m0\"") != NULL &&
            strstr(json, "\"healthy\":true") != NULL,
        "cluster status as JSON", st == GDRSTORE_OK ? json : gdrstore_error(cluster));
  gdrstore_free(json);
  st = gdrstore_cluster_create_volume(cluster, volume, 1 << 20, 1, NULL, NULL);
  check(st == GDRSTORE_FAILED_PRECONDITION && strstr(gdrstore_error(cluster), "members file"),
        "a members file cluster takes no new volume", gdrstore_error(cluster));
  st = gdrstore_cluster_get(cluster, volume, 32 << 20, 1, cb, 0);
  check(st == GDRSTORE_OUT_OF_RANGE, "past the cluster volume's end", gdrstore_error(cluster));
  hostile_cluster_steps(cluster, volume);

  gdrstore_buffer_release(db);
  free(direct);
  gdrstore_cluster_buffer_release(cb);
  gdrstore_cluster_close(cluster);
  unlink(path);

  gdrstore_cluster* bad = NULL;
  co.members_file = NULL;
  co.etcd_url = "etcd//127.0.0.1:2379/p";
  st = gdrstore_cluster_open(&co, &bad, error, sizeof(error));
  check(st == GDRSTORE_INVALID_ARGUMENT && bad == NULL && strstr(error, "etcd//") != NULL,
        "bad etcd URL refused naming it", error);
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s HOST:PORT VOLUME\n", argv[0]);
    return 2;
  }
  const char* volume = argv[2];
  check(gdrstore_abi_version() == GDRSTORE_ABI_VERSION, "abi version", "header and library differ");

  gdrstore_client_options opts;
  gdrstore_client_options_init(&opts);
  opts.daemon_address = argv[1];
  opts.transport = "tcp";
  gdrstore_client* client = NULL;
  char error[256];
  gdrstore_status st = gdrstore_client_open(&opts, &client, error, sizeof(error));
  check(st == GDRSTORE_OK, "open", error);
  if (st != GDRSTORE_OK) return 1;

  /* Errors: a bad transport name is refused before anything is opened. */
  gdrstore_client* bad = NULL;
  opts.transport = "carrier-pigeon";
  st = gdrstore_client_open(&opts, &bad, error, sizeof(error));
  check(st == GDRSTORE_INVALID_ARGUMENT && bad == NULL && strstr(error, "carrier-pigeon") != NULL,
        "bad transport refused", error);

  /* Memory this program owns, registered in place. */
  const size_t n = 1 << 20;
  unsigned char* mine = malloc(n + 3);
  unsigned char* p = mine + 3; /* deliberately unaligned */
  gdrstore_buffer* buf = NULL;
  st = gdrstore_register_host(client, p, n, &buf);
  check(st == GDRSTORE_OK, "register host memory", gdrstore_error(client));
  if (st != GDRSTORE_OK) return 1;
  gdrstore_buffer_info info;
  gdrstore_buffer_get_info(buf, &info);
  check(info.host == p && info.size == n && info.gpu_ordinal == -1 && info.writable == 1,
        "buffer info", "");

  gdrstore_result r;
  st = gdrstore_get(client, volume, 4096, n, buf, 0, &r);
  check(st == GDRSTORE_OK && r.bytes == n, "get", gdrstore_error(client));
  /* The path it took: this program's memory, reached over tcp. */
  check(strcmp(gdrstore_last_path(client), "tcp/host") == 0, "get names its path",
        gdrstore_last_path(client));
  uint64_t bad_byte = 0;
  st = gdrstore_verify(buf, 0, n, volume, 4096, &bad_byte);
  check(st == GDRSTORE_OK, "get delivered the volume's pattern", gdrstore_error(buf));

  /* put: this program's bytes into the store, then a get into other memory proves them. */
  for (size_t i = 0; i < n; ++i) p[i] = (unsigned char)(i * 7 + 1);
  st = gdrstore_put(client, buf, 0, volume, 8 << 20, n, 0, &r);
  check(st == GDRSTORE_OK && r.bytes == n, "put", gdrstore_error(client));
  unsigned char* other = malloc(n);
  gdrstore_buffer* back = NULL;
  st = gdrstore_register_host(client, other, n, &back);
  check(st == GDRSTORE_OK, "register second buffer", gdrstore_error(client));
  st = gdrstore_get(client, volume, 8 << 20, n, back, 0, NULL);
  check(st == GDRSTORE_OK && memcmp(other, p, n) == 0, "put landed", gdrstore_error(client));

  /* The same range again is the same registration. */
  gdrstore_buffer* again = NULL;
  st = gdrstore_register_host(client, p, n, &again);
  gdrstore_buffer_info info2;
  gdrstore_buffer_get_info(again, &info2);
  check(st == GDRSTORE_OK && info2.address == info.address, "re-registration", "");
  gdrstore_buffer_release(again);

  /* Errors carry gRPC's code and the daemon's message. */
  st = gdrstore_get(client, "no-such-volume", 0, 16, buf, 0, NULL);
  check(st == GDRSTORE_NOT_FOUND && strstr(gdrstore_error(client), "no-such-volume") != NULL,
        "unknown volume is NOT_FOUND", gdrstore_error(client));
  check(gdrstore_last_path(client)[0] == '\0', "a failed op has no path", "");
  check(strcmp(gdrstore_status_name(st), "NOT_FOUND") == 0, "status name", "");
  st = gdrstore_get(client, volume, 0, n + 1, buf, 0, NULL);
  check(st == GDRSTORE_INVALID_ARGUMENT, "op larger than the buffer", gdrstore_error(client));

  /* A stream: 64 gets of 16 KiB, collected by polling. */
  gdrstore_stream* stream = NULL;
  st = gdrstore_stream_open(client, &stream);
  check(st == GDRSTORE_OK, "stream open", gdrstore_error(client));
  const int ops = 64;
  const size_t each = 16 << 10;
  for (int i = 0; i < ops; ++i) {
    st = gdrstore_stream_get(stream, volume, (uint64_t)i * each, each, back, (size_t)i * each,
                             1000 + (uint64_t)i);
    if (st != GDRSTORE_OK) break;
  }
  check(st == GDRSTORE_OK, "stream submit", gdrstore_error(stream));
  int seen = 0, good = 0;
  uint64_t tag_sum = 0;
  gdrstore_completion done[16];
  while (seen < ops) {
    size_t got = 0;
    st = gdrstore_poll(stream, done, 16, 10000, &got);
    if (st != GDRSTORE_OK || got == 0) break;
    for (size_t i = 0; i < got; ++i) {
      ++seen;
      tag_sum += done[i].tag;
      /* A completed op's message is the path it took. */
      if (done[i].status == GDRSTORE_OK && done[i].bytes == each &&
          strcmp(done[i].message, "tcp/host") == 0) {
        ++good;
      }
    }
  }
  check(seen == ops && good == ops && tag_sum == (uint64_t)ops * 1000 + (ops - 1) * ops / 2,
        "stream completions polled", "");
  check(gdrstore_stream_outstanding(stream) == 0, "nothing outstanding", "");
  st = gdrstore_verify(back, 0, (size_t)ops * each, volume, 0, &bad_byte);
  check(st == GDRSTORE_OK, "stream gets delivered the pattern", gdrstore_error(back));
  /* A failing op in a stream comes back through poll with its code and message. */
  st = gdrstore_stream_get(stream, "no-such-volume", 0, 16, back, 0, 7);
  size_t got = 0;
  gdrstore_status polled = gdrstore_poll(stream, done, 1, 10000, &got);
  check(st == GDRSTORE_OK && polled == GDRSTORE_OK && got == 1 && done[0].tag == 7 &&
            done[0].status == GDRSTORE_NOT_FOUND && strstr(done[0].message, "no-such-volume"),
        "failed op polled with its reason", done[0].message);
  check(gdrstore_stream_close(stream) == GDRSTORE_OK, "stream close", "");

  char* json = NULL;
  st = gdrstore_info_json(client, &json);
  check(st == GDRSTORE_OK && json != NULL && strstr(json, volume) != NULL, "info as JSON",
        gdrstore_error(client));
  gdrstore_free(json);

  cluster_steps(argv[1], volume, client);
  hostile_steps(client, volume);

  gdrstore_buffer_release(buf);
  gdrstore_buffer_release(back);
  gdrstore_client_close(client);
  free(mine);
  free(other);
  printf("%s\n", failures == 0 ? "C ABI demo PASSED" : "C ABI demo FAILED");
  return failures == 0 ? 0 : 1;
}
