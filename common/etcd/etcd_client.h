// A small etcd v3 client over etcd's own gRPC API (KV, Lease, Watch): what the daemon needs to
// register itself under a lease and what clients need to read and follow the cluster layout.
// One channel per endpoint; a call that finds its endpoint unreachable moves to the next.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace gdr::etcd {

struct KeyValue {
  std::string key, value;
  int64_t create_revision = 0, mod_revision = 0, version = 0, lease = 0;
};

// TLS to etcd's client port, as PEM files; all empty: plaintext. `cert` and `key` go together
// (etcd's --client-cert-auth asks for them); an empty `ca`: gRPC's default roots.
struct EtcdTls {
  std::string ca, cert, key;
  bool enabled() const { return !ca.empty() || !cert.empty() || !key.empty(); }
};

struct WatchEvent {
  enum Kind { kPut, kDelete } kind;
  KeyValue kv;  // a delete carries the key and its revision, no value
};

// Thread-safe: any number of threads may call it at once. Every call has a deadline of
// `call_timeout` per endpoint tried, starting with the one that answered last. A call whose
// endpoint answers UNAVAILABLE or DEADLINE_EXCEEDED is tried on the next one (so a mutation
// may be applied twice when its answer, not its request, was lost); when every endpoint failed
// the error has the last one's code and names each endpoint with what it answered. Other
// errors come back with etcd's code and message, prefixed with the call and the endpoint.
// No call waits for etcd to come up: while it is away they fail at once (UNAVAILABLE) or at the
// deadline; a thread of the client keeps reconnecting, so calls succeed as soon as it is back.
class EtcdClient {
 public:
  struct Options {
    std::vector<std::string> endpoints;  // "host:port", tried in this order
    absl::Duration call_timeout = absl::Seconds(2);
    EtcdTls tls = {};
  };

  // Creating never needs etcd up. INVALID_ARGUMENT for no endpoint, one that is not
  // HOST:PORT, or a call_timeout that is not positive; a TLS file that cannot be read or holds
  // no PEM (TlsMaterial::Load's errors, naming it as --cluster-tls-ca/cert/key).
  static absl::StatusOr<std::unique_ptr<EtcdClient>> Create(Options options);
  ~EtcdClient();
  EtcdClient(const EtcdClient&) = delete;
  EtcdClient& operator=(const EtcdClient&) = delete;

  // `lease` 0: no lease. NOT_FOUND when the lease is gone. INVALID_ARGUMENT for an empty key.
  absl::Status Put(const std::string& key, const std::string& value, int64_t lease = 0);
  // One transaction: put only if the key does not exist (create_revision == 0). true: it was
  // put; false: the key existed and is unchanged.
  absl::StatusOr<bool> PutIfAbsent(const std::string& key, const std::string& value);
  // nullopt when the key does not exist.
  absl::StatusOr<std::optional<KeyValue>> Get(const std::string& key);
  // Every key under `prefix` (range [prefix, prefix+1)), in key order; *revision = the store's
  // revision the answer reflects (hand it to WatchPrefix to follow on from there). An empty
  // prefix means every key.
  absl::StatusOr<std::vector<KeyValue>> GetPrefix(const std::string& prefix,
                                                  int64_t* revision = nullptr);
  // OK whether or not the key existed.
  absl::Status Delete(const std::string& key);
  // Drops the history before `revision` (each key keeps its value as of then). OUT_OF_RANGE
  // when `revision` is already compacted or is in the future.
  absl::Status Compact(int64_t revision);

  // A lease of `ttl` rounded up to whole seconds (etcd may raise it to its minimum TTL).
  // INVALID_ARGUMENT for a ttl that is not positive.
  absl::StatusOr<int64_t> GrantLease(absl::Duration ttl);
  // One keepalive; returns the TTL left as etcd says; NOT_FOUND when the lease is gone.
  absl::StatusOr<absl::Duration> KeepAliveOnce(int64_t lease);
  // The TTL left; NOT_FOUND when the lease is gone (expired or revoked).
  absl::StatusOr<absl::Duration> TimeToLive(int64_t lease);
  // Ends the lease and deletes every key attached to it. NOT_FOUND when it is already gone.
  absl::Status RevokeLease(int64_t lease);

  // A running watch; destroying it stops the watch and joins its thread (so it must not be
  // destroyed from inside its own callbacks). It may outlive the client that made it.
  class Watch {
   public:
    virtual ~Watch() = default;
  };
  // Calls `on_event` (required; `on_error` is optional) on the watch's own thread, in revision
  // order, for each change under `prefix` with a revision above `start_revision` (0: changes from
  // when the watch is first established). When the stream breaks (etcd stopped, endpoint lost)
  // `on_error` gets the error once and the watch is re-established, on the next endpoint, from the
  // last revision delivered + 1, so nothing is missed or repeated; `on_error` gets OK once it is
  // back. If etcd has compacted revisions the watch still needed, `on_error` gets DATA_LOSS naming
  // them and the watch goes on from the oldest revision etcd still has (the caller re-reads with
  // GetPrefix). Callbacks never run concurrently with each other.
  std::unique_ptr<Watch> WatchPrefix(const std::string& prefix, int64_t start_revision,
                                     std::function<void(const WatchEvent&)> on_event,
                                     std::function<void(const absl::Status&)> on_error = nullptr);

  const std::vector<std::string>& endpoints() const;

  // The channels and stubs, one per endpoint, and the thread that keeps them connected; shared
  // with the watches. An implementation detail, defined in the .cc.
  struct Channels;

 private:
  EtcdClient(std::vector<std::string> endpoints, absl::Duration call_timeout,
             std::shared_ptr<Channels> channels);

  std::vector<std::string> endpoints_;
  absl::Duration call_timeout_;
  std::shared_ptr<Channels> channels_;
};

}  // namespace gdr::etcd
