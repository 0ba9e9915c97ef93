/* The C ABI of libgdrclient: usable from C, Rust, Go or Python (ctypes) without a C++ compiler.
 *
 * Handles are opaque values, never addresses: the library keeps a table of the live ones, so
 * a handle used after its release (or one it never returned, or one of another type) is
 * refused with GDRSTORE_INVALID_ARGUMENT naming it, and releasing one twice does nothing. A
 * released handle's value is never handed out again. Every call returns a gdrstore_status whose
 * values are gRPC's codes; the message of the calling thread's last failure on a handle is
 * gdrstore_error(handle). Every pointer and size is checked (NULL with a nonzero size, ranges
 * that wrap) before it is used. No C++ type or exception crosses this boundary, and no callback
 * ever runs on a thread the caller did not make: async ops are collected with gdrstore_poll.
 *
 * Verbs: a "get" moves store bytes into the caller's buffer (the wire's Write RPC: the daemon
 * writes into client memory); a "put" moves the buffer's bytes into the store (the wire's Read).
 *
 * Thread safety: every function may be called from any thread; one stream may be used by
 * several threads at once. A handle released while another thread is inside a call with it
 * stays valid for that call (its object goes when the call returns); calls that start after
 * the release are refused. Releasing a buffer still waits for the ops in flight on it.
 *
 * Stores: a client (one daemon) and a cluster are both stores. Every call below whose first
 * argument is a gdrstore_client* (buffers, volume create / delete, get / put, last_path,
 * streams and polls) also takes a gdrstore_cluster* cast to it; those that are one daemon's
 * alone (info_json, stats_json, volume_info_json) refuse a cluster, naming it. A
 * gdrstore_cluster_buffer is a gdrstore_buffer made by a cluster (either pointer type works).
 *
 * Closing: handles may be released in any order. A buffer or stream belongs to the client or
 * cluster that made it: another one refuses it (INVALID_ARGUMENT, naming the owner), and once
 * its store is closed a stream refuses new ops (FAILED_PRECONDITION) while a buffer keeps its
 * memory; each is freed by its own release, once.
 */
#ifndef GDRSTORE_GDRSTORE_H_
#define GDRSTORE_GDRSTORE_H_

#include <stddef.h>
#include <stdint.h>

#include "gdrstore/connection_options.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define GDRSTORE_EXPORT __attribute__((visibility("default")))
#else
#define GDRSTORE_EXPORT
#endif

/* Bumped when a declaration here changes incompatibly; new functions do not bump it. */
#define GDRSTORE_ABI_VERSION 1
GDRSTORE_EXPORT uint32_t gdrstore_abi_version(void);

/* gRPC's status codes, same numbers. */
typedef enum gdrstore_status {
  GDRSTORE_OK = 0,
  GDRSTORE_CANCELLED = 1,
  GDRSTORE_UNKNOWN = 2,
  GDRSTORE_INVALID_ARGUMENT = 3,
  GDRSTORE_DEADLINE_EXCEEDED = 4,
  GDRSTORE_NOT_FOUND = 5,
  GDRSTORE_ALREADY_EXISTS = 6,
  GDRSTORE_PERMISSION_DENIED = 7,
  GDRSTORE_RESOURCE_EXHAUSTED = 8,
  GDRSTORE_FAILED_PRECONDITION = 9,
  GDRSTORE_ABORTED = 10,
  GDRSTORE_OUT_OF_RANGE = 11,
  GDRSTORE_UNIMPLEMENTED = 12,
  GDRSTORE_INTERNAL = 13,
  GDRSTORE_UNAVAILABLE = 14,
  GDRSTORE_DATA_LOSS = 15,
  GDRSTORE_UNAUTHENTICATED = 16
} gdrstore_status;

/* "OK", "NOT_FOUND", ...; "UNKNOWN" for a value outside the enum. Static storage. */
GDRSTORE_EXPORT const char* gdrstore_status_name(gdrstore_status status);

typedef struct gdrstore_client gdrstore_client;
typedef struct gdrstore_buffer gdrstore_buffer;
typedef struct gdrstore_stream gdrstore_stream;

/* Like errno, per thread and per handle: the message of the calling thread's last failing call
 * on `handle` (a client, buffer, stream, cluster or cluster buffer), so another thread's
 * failures on the same handle never replace it. "" when this thread has no failure on a live
 * handle; a reason when the handle is not live. The library keeps the messages of the 16
 * handles this thread failed on last. The text is valid until this thread's next failing call.
 * Calls that take no handle (gdrstore_pattern_check) record their reason on NULL. */
GDRSTORE_EXPORT const char* gdrstore_error(const void* handle);

typedef struct gdrstore_client_options {
  size_t struct_size; /* sizeof(gdrstore_client_options); set by _init */
  /* The fields of gdrstore/connection_options.h's list, in its order, each documented there:
   * daemon_address, transport, token, token_file, rdma_device, rpc_timeout_ms, then those
   * appended later (tls_ca, tls_cert, tls_key, tls_server_name, crc32c, fail_when_full, agent,
   * local_socket, require, stream_calls, ...). The library reads each only when struct_size covers it, so
   * callers built against an older header keep working (and get the defaults). */
#define GDRSTORE_CLIENT_OPTIONS_FIELD(field, c_type, ...) c_type field;
  GDRSTORE_CONNECTION_OPTIONS(GDRSTORE_CLIENT_OPTIONS_FIELD)
#undef GDRSTORE_CLIENT_OPTIONS_FIELD
} gdrstore_client_options;

GDRSTORE_EXPORT void gdrstore_client_options_init(gdrstore_client_options* options);

/* Connects (see gdrstore::Client::Connect). On failure *client is NULL and, when `error` is not
 * NULL, the reason is copied there (NUL-terminated, truncated to error_len). */
GDRSTORE_EXPORT gdrstore_status gdrstore_client_open(const gdrstore_client_options* options,
                                                     gdrstore_client** client, char* error,
                                                     size_t error_len);
/* Ends the client's open streams as gdrstore_stream_close would (every op answered, each within
 * its deadline; the answers stay for gdrstore_poll), then closes the transport. Its buffers and
 * streams may be released before or after: afterwards a stream refuses new ops with
 * GDRSTORE_FAILED_PRECONDITION (gdrstore_poll, gdrstore_stream_outstanding and
 * gdrstore_stream_close work; the last returns the call's status), and a buffer keeps its
 * memory (copy_in, copy_out, get_info and verify work) until released. A NULL, released or
 * unknown handle: nothing happens. */
GDRSTORE_EXPORT void gdrstore_client_close(gdrstore_client* client);

/* GetInfo / GetStats of the daemon as proto3 JSON, in memory the caller frees with
 * gdrstore_free; every page of their lists joined (gdrstore::Client::GetInfo, GetStats). */
GDRSTORE_EXPORT gdrstore_status gdrstore_info_json(gdrstore_client* client, char** json);
GDRSTORE_EXPORT gdrstore_status gdrstore_stats_json(gdrstore_client* client, char** json);
/* GetInfo with "volumes" holding `volume` alone, or none when the daemon shows no volume of
 * that name (gdrstore::Client::GetVolumeInfo): one small answer however many it serves. */
GDRSTORE_EXPORT gdrstore_status gdrstore_volume_info_json(gdrstore_client* client,
                                                          const char* volume, char** json);
GDRSTORE_EXPORT void gdrstore_free(void* p);
/* The daemon's volumes at run time, through its Admin service (an admin token when it has a
 * token file; docs/operations.md): a memory volume of `size` bytes, or with `file` != 0 one in
 * its writable --volume-dir; `media` (may be NULL) as --volume's options after NAME=SIZE but
 * file=: media options, and repeat=SIZE for a memory volume over SIZE bytes of memory seen again
 * every SIZE bytes (docs/simulation.md). `created`, when
 * not NULL, is set to 1 when a file was made now, 0 when an existing one is served. The
 * daemon's refusal names the field (INVALID_ARGUMENT, ALREADY_EXISTS, RESOURCE_EXHAUSTED...). */
GDRSTORE_EXPORT gdrstore_status gdrstore_volume_create(gdrstore_client* client, const char* name,
                                                       uint64_t size, int file,
                                                       const char* media, int* created);
/* Takes a volume away (ops in flight on it finish); `delete_file` != 0 also removes its file. */
GDRSTORE_EXPORT gdrstore_status gdrstore_volume_delete(gdrstore_client* client, const char* name,
                                                       int delete_file);

/* Memory the caller owns, registered in place (no copy); the same range again reuses the
 * registration. GPU memory is a device pointer (CUdeviceptr); its GPU is found from it. */
GDRSTORE_EXPORT gdrstore_status gdrstore_register_host(gdrstore_client* client, void* p,
                                                       size_t n, gdrstore_buffer** buffer);
GDRSTORE_EXPORT gdrstore_status gdrstore_register_gpu(gdrstore_client* client,
                                                      uint64_t device_ptr, size_t n,
                                                      gdrstore_buffer** buffer);
/* Memory the library allocates: host (page-aligned, zeroed) or on the GPU `gpu` names (PCI
 * address or CUDA ordinal). */
GDRSTORE_EXPORT gdrstore_status gdrstore_alloc_host(gdrstore_client* client, size_t n,
                                                    gdrstore_buffer** buffer);
GDRSTORE_EXPORT gdrstore_status gdrstore_alloc_gpu(gdrstore_client* client, const char* gpu,
                                                   size_t n, gdrstore_buffer** buffer);
/* Waits for the ops in flight on the buffer, then lets go of it (memory the caller owns may be
 * freed once this returns). A NULL, released or unknown handle: nothing happens. */
GDRSTORE_EXPORT void gdrstore_buffer_release(gdrstore_buffer* buffer);

typedef struct gdrstore_buffer_info {
  void* host;        /* host memory: its address; GPU memory: NULL */
  uint64_t address;  /* the address descriptors name (the device pointer on a GPU) */
  size_t size;
  int gpu_ordinal;   /* -1 for host memory */
  int writable;      /* 0: read-only host memory, puts only */
} gdrstore_buffer_info;
/* A handle that is not live: *info zeroed (gpu_ordinal -1). */
GDRSTORE_EXPORT void gdrstore_buffer_get_info(const gdrstore_buffer* buffer,
                                              gdrstore_buffer_info* info);

/* Host <-> buffer copies of [offset, offset + n) (cuMemcpy for GPU memory). src / dst may be
 * NULL only when n is 0 (INVALID_ARGUMENT otherwise); OUT_OF_RANGE past the buffer's end. */
GDRSTORE_EXPORT gdrstore_status gdrstore_buffer_copy_in(gdrstore_buffer* buffer, size_t offset,
                                                        const void* src, size_t n);
GDRSTORE_EXPORT gdrstore_status gdrstore_buffer_copy_out(gdrstore_buffer* buffer, size_t offset,
                                                         void* dst, size_t n);

/* Checks [offset, offset + n) of the buffer against the store's initial pattern of `volume` at
 * `volume_offset` (what a get of an unwritten extent delivers). GDRSTORE_DATA_LOSS with the
 * first differing byte in *first_bad (when not NULL) if they differ. */
GDRSTORE_EXPORT gdrstore_status gdrstore_verify(gdrstore_buffer* buffer, size_t offset,
                                                size_t n, const char* volume,
                                                uint64_t volume_offset, uint64_t* first_bad);

/* The same check on host memory [data, data + n), no client needed. */
GDRSTORE_EXPORT gdrstore_status gdrstore_pattern_check(const void* data, size_t n,
                                                       const char* volume,
                                                       uint64_t volume_offset,
                                                       uint64_t* first_bad);

typedef struct gdrstore_result {
  uint64_t bytes;       /* bytes moved */
  uint64_t service_ns;  /* daemon-side time */
} gdrstore_result;

/* Blocking ops; `result` may be NULL. get: store [offset, +n) of `volume` -> buffer at
 * buffer_offset. put: buffer -> store; `sync` != 0 answers only once a file-backed volume has
 * the bytes on disk. */
GDRSTORE_EXPORT gdrstore_status gdrstore_get(gdrstore_client* client, const char* volume,
                                             uint64_t offset, uint64_t n,
                                             gdrstore_buffer* buffer, size_t buffer_offset,
                                             gdrstore_result* result);
GDRSTORE_EXPORT gdrstore_status gdrstore_put(gdrstore_client* client, gdrstore_buffer* buffer,
                                             size_t buffer_offset, const char* volume,
                                             uint64_t offset, uint64_t n, int sync,
                                             gdrstore_result* result);

/* The path this thread's last successful gdrstore_get / gdrstore_put on `client` took
 * ("tcp/host", "rc:mlx5_0/dma-buf", "agent/cuda-ipc>tcp/staged"; OpResult::path); "" when this
 * thread's last op was on another client, failed, or there was none. Valid until this thread's
 * next op. */
GDRSTORE_EXPORT const char* gdrstore_last_path(const gdrstore_client* client);

/* Many ops over one Stream call (on a cluster: each op split over its members' streams).
 * Submissions return at once; each op's outcome is collected once by gdrstore_poll, tagged
 * with the caller's `tag`. A cluster stream keeps its cluster's connections until it closes. */
GDRSTORE_EXPORT gdrstore_status gdrstore_stream_open(gdrstore_client* client,
                                                     gdrstore_stream** stream);
GDRSTORE_EXPORT gdrstore_status gdrstore_stream_get(gdrstore_stream* stream, const char* volume,
                                                    uint64_t offset, uint64_t n,
                                                    gdrstore_buffer* buffer,
                                                    size_t buffer_offset, uint64_t tag);
GDRSTORE_EXPORT gdrstore_status gdrstore_stream_put(gdrstore_stream* stream,
                                                    gdrstore_buffer* buffer, size_t buffer_offset,
                                                    const char* volume, uint64_t offset,
                                                    uint64_t n, uint64_t tag);

typedef struct gdrstore_completion {
  uint64_t tag;
  gdrstore_status status;
  uint64_t bytes;
  uint64_t service_ns;
  char message[256];  /* why, when status is not OK; the path the op took when it is OK (as
                         gdrstore_last_path says it); truncated */
} gdrstore_completion;

/* Moves up to `max` finished ops into `completions` and their count into *count. Waits up to
 * `timeout_ms` for at least one (0: does not wait; negative: waits as long as ops are
 * outstanding).
 * *count is 0 after the timeout or when nothing is outstanding. */
GDRSTORE_EXPORT gdrstore_status gdrstore_poll(gdrstore_stream* stream,
                                              gdrstore_completion* completions, size_t max,
                                              int timeout_ms, size_t* count);
/* Ops submitted and not yet collected by gdrstore_poll. */
GDRSTORE_EXPORT size_t gdrstore_stream_outstanding(const gdrstore_stream* stream);
/* Half-closes the call, waits for every op to be answered (answers not yet polled are dropped)
 * and frees the stream; the call's final status, its message readable with
 * gdrstore_error(stream) on this thread afterwards. INVALID_ARGUMENT for a handle that is not
 * live (closing twice). */
GDRSTORE_EXPORT gdrstore_status gdrstore_stream_close(gdrstore_stream* stream);

/* ---- A cluster (see gdrstore/cluster.h) ----
 * Many daemons as one namespace: cluster volumes striped over members, R replicas each. A put
 * is acknowledged when every replica has every piece; a get reads each piece from its first
 * healthy replica. Members come from etcd (daemons started with --cluster) or a static members
 * file (JSON of gdrstore.v1.ClusterFile). A cluster handle cast to gdrstore_client* works with
 * the store calls above (buffers, get / put with sync, volumes, streams and polls); the
 * gdrstore_cluster_* buffer and op calls below forward to them. */
typedef struct gdrstore_cluster gdrstore_cluster;
typedef struct gdrstore_cluster_buffer gdrstore_cluster_buffer;

typedef struct gdrstore_cluster_options {
  size_t struct_size;       /* sizeof(gdrstore_cluster_options); set by _init */
  const char* etcd_url;     /* "etcd://HOST:PORT[,HOST:PORT...]/PREFIX"; or NULL and ... */
  const char* members_file; /* ... a static members file; exactly one of the two */
  /* How each member is reached (transport, token, TLS, deadline); daemon_address is ignored,
   * every member's comes from its entry, and of the environment only $GDRSTORE_TOKEN_FILE is
   * read (a NULL token and token_file), never $GDRSTORE_AGENT or $GDRSTORE_ADDRESS. A pointer, so that either struct can grow on its own
   * without moving the other's fields. NULL: gdrstore_client_options_init's defaults. */
  const gdrstore_client_options* client;
  uint32_t member_retry_ms; /* a member that failed is passed over this long; 0: 1000 */
  uint32_t etcd_timeout_ms; /* deadline of each etcd call; 0: 2000 */
  /* TLS to etcd (etcd_url only), as PEM files; all NULL: plaintext. etcd_tls_ca: the CA etcd's
   * certificate is checked against (NULL: the system's roots); etcd_tls_cert and etcd_tls_key:
   * the client certificate etcd's --client-cert-auth asks for, both or neither. A file that
   * cannot be read or holds no PEM is INVALID_ARGUMENT naming it. Read only when struct_size
   * covers them, so a caller built against the header without them is unaffected. */
  const char* etcd_tls_ca;
  const char* etcd_tls_cert;
  const char* etcd_tls_key;
} gdrstore_cluster_options;

GDRSTORE_EXPORT void gdrstore_cluster_options_init(gdrstore_cluster_options* options);

/* Reads the members (and layouts) and follows etcd's changes; members are connected on first
 * use. On failure *cluster is NULL and, when `error` is not NULL, the reason is copied there
 * (NUL-terminated, truncated to error_len): INVALID_ARGUMENT for a URL or file that does not
 * parse, naming what is wrong; UNAVAILABLE when etcd does not answer, naming each endpoint. */
GDRSTORE_EXPORT gdrstore_status gdrstore_cluster_open(const gdrstore_cluster_options* options,
                                                      gdrstore_cluster** cluster, char* error,
                                                      size_t error_len);
/* Ends its open streams as gdrstore_client_close does (every op answered, the answers kept for
 * gdrstore_poll; new ops refused FAILED_PRECONDITION), then the links and the etcd watch, once
 * its last stream is closed. Its buffers may be released before or after: each keeps its memory
 * (data, size) until released, and no cluster takes it for an op any more. A NULL, released or
 * unknown handle: nothing happens. */
GDRSTORE_EXPORT void gdrstore_cluster_close(gdrstore_cluster* cluster);

/* Memory for cluster ops, registered with each member the first time an op there uses it.
 * alloc_host: the library's (page-aligned, zeroed); register_host / register_gpu: the caller's,
 * in place (a device pointer for GPU memory), which must outlive the buffer. */
GDRSTORE_EXPORT gdrstore_status gdrstore_cluster_alloc_host(gdrstore_cluster* cluster, size_t n,
                                                            gdrstore_cluster_buffer** buffer);
GDRSTORE_EXPORT gdrstore_status gdrstore_cluster_register_host(gdrstore_cluster* cluster,
                                                               void* p, size_t n,
                                                               gdrstore_cluster_buffer** buffer);
GDRSTORE_EXPORT gdrstore_status gdrstore_cluster_register_gpu(gdrstore_cluster* cluster,
                                                              uint64_t device_ptr, size_t n,
                                                              gdrstore_cluster_buffer** buffer);
/* Waits for the ops in flight on the buffer, then lets go of it. A NULL, released or unknown
 * handle: nothing happens. */
GDRSTORE_EXPORT void gdrstore_cluster_buffer_release(gdrstore_cluster_buffer* buffer);
/* The buffer's memory (the device pointer for GPU memory) and its size in bytes; NULL and 0
 * for a handle that is not live. */
GDRSTORE_EXPORT void* gdrstore_cluster_buffer_data(const gdrstore_cluster_buffer* buffer);
GDRSTORE_EXPORT size_t gdrstore_cluster_buffer_size(const gdrstore_cluster_buffer* buffer);

/* gdrstore_put (sync 0) / gdrstore_get on the cluster, without a result. Blocking ops on
 * cluster volume `volume`, logical bytes [offset, offset + n), against the
 * buffer from buffer_offset. put: buffer -> store on every replica; get: store -> buffer.
 * A failure names the member at fault where one is (UNAVAILABLE for a member that is gone). */
GDRSTORE_EXPORT gdrstore_status gdrstore_cluster_put(gdrstore_cluster* cluster,
                                                     const char* volume, uint64_t offset,
                                                     uint64_t n, gdrstore_cluster_buffer* buffer,
                                                     size_t buffer_offset);
GDRSTORE_EXPORT gdrstore_status gdrstore_cluster_get(gdrstore_cluster* cluster,
                                                     const char* volume, uint64_t offset,
                                                     uint64_t n, gdrstore_cluster_buffer* buffer,
                                                     size_t buffer_offset);

/* Creates cluster volume `name` (etcd clusters only): stripe units of `stripe_unit` bytes (a
 * power of two, 4 KiB .. 1 GiB) with `replicas` copies over `members` ("m0,m1,m2"; NULL or "":
 * every member registered now). Each member must serve a volume `name`. ALREADY_EXISTS when it
 * exists. When `layout_json` is not NULL it receives the new layout as proto3 JSON, freed with
 * gdrstore_free. */
GDRSTORE_EXPORT gdrstore_status gdrstore_cluster_create_volume(gdrstore_cluster* cluster,
                                                               const char* name,
                                                               uint64_t stripe_unit,
                                                               uint32_t replicas,
                                                               const char* members,
                                                               char** layout_json);

/* As gdrstore_cluster_create_volume, after making volume `name` on every member through its
 * Admin service: just big enough that the cluster volume holds `size` bytes (rounded up to
 * whole rows), memory-backed or (`file` nonzero) a file in the members' writable --volume-dir,
 * with `media` options (NULL or "": none). A member that refuses is named; the volumes made on
 * the others are deleted again. */
GDRSTORE_EXPORT gdrstore_status gdrstore_cluster_make_volume(gdrstore_cluster* cluster,
                                                             const char* name, uint64_t size,
                                                             uint64_t stripe_unit,
                                                             uint32_t replicas,
                                                             const char* members, int file,
                                                             const char* media,
                                                             char** layout_json);

/* Removes cluster volume `name`'s layout, and with `member_volumes` nonzero the volume `name` on
 * each member (their files too with `delete_files`). NOT_FOUND when it has no layout. */
GDRSTORE_EXPORT gdrstore_status gdrstore_cluster_delete_volume(gdrstore_cluster* cluster,
                                                               const char* name,
                                                               int member_volumes,
                                                               int delete_files);

/* {"source": URL or file, "members": [{"entry": ClusterMember, "present", "healthy", "error",
 * "lease_ttl_s", "ops", "bytes", "errors"}...], "volumes": [ClusterVolume...]} as JSON (proto
 * field names), each member pinged now; freed with gdrstore_free. */
GDRSTORE_EXPORT gdrstore_status gdrstore_cluster_status_json(gdrstore_cluster* cluster,
                                                             char** json);

/* ---- GPU memory for PyTorch (gdrstore.torch.memory_pool) ----
 * The two functions torch.cuda.memory.CUDAPluggableAllocator(<this library's path>,
 * "gdrstore_torch_alloc", "gdrstore_torch_free") calls, with the signatures PyTorch's C++ side
 * gives them (`stream` is a cudaStream_t, unused: the memory is usable at once).
 *
 * alloc: `size` bytes (rounded up to the GPU's allocation granularity, 2 MiB on current GPUs)
 * on the GPU of CUDA ordinal `device` in this process, made with the VMM API (cuMemCreate)
 * shareable as a POSIX file descriptor and GPUDirect-RDMA capable: a tensor in it is handed to
 * gdrstored's local transport or gdragent as a descriptor (path .../vmm-fd), which needs
 * neither a shared IPC nor a shared PID namespace, and rc/dc register it by dma-buf. NULL for
 * size 0 and on any failure (no driver, a build without CUDA, an ordinal that names no GPU,
 * the GPU full), the reason logged the first time it occurs; PyTorch then raises its
 * out-of-memory error.
 * free: waits for the GPU's queued work (as cudaFree does), then unmaps and releases what alloc
 * returned. NULL is ignored; a pointer alloc did not return, or one freed already, is logged
 * and left alone. Neither changes the calling thread's current CUDA context. Thread-safe. */
GDRSTORE_EXPORT void* gdrstore_torch_alloc(size_t size, int device, void* stream);
GDRSTORE_EXPORT void gdrstore_torch_free(void* ptr, size_t size, int device, void* stream);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif /* GDRSTORE_GDRSTORE_H_ */
