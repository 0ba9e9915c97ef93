#include "common/etcd/etcd_client.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/grpc/grpc_status.h"
#include "common/grpc/tls_material.h"
#include "common/base/host_port.h"
#include "common/base/thread_name.h"
#include "etcd/etcdserver/etcdserverpb/rpc.grpc.pb.h"

namespace gdr::etcd {

namespace pb = ::etcdserverpb;

namespace {

// Reconnect soon after etcd comes back (gRPC's default backoff grows to two minutes), but give
// a connection attempt two seconds before calling it failed: the host may be loaded.
constexpr int kInitialReconnectMs = 100;
constexpr int kMaxReconnectMs = 1000;
constexpr int kMinConnectTimeoutMs = 2000;
// How often the connection keeper looks up from its wait to see whether it should stop.
constexpr absl::Duration kKeeperTick = absl::Milliseconds(250);
// A watch stream can sit idle for hours; pings find a silently vanished peer. etcd refuses
// pings more often than every 5 s (its --grpc-keepalive-min-time) and without a call open.
constexpr int kKeepaliveTimeMs = 10000;
constexpr int kKeepaliveTimeoutMs = 5000;
// Large prefixes come back in one Range answer; gRPC's default limit is 4 MiB.
constexpr int kMaxReceiveBytes = 64 << 20;
// Between two attempts to re-establish a broken watch.
constexpr absl::Duration kWatchRetryFirst = absl::Milliseconds(50);
constexpr absl::Duration kWatchRetryMax = absl::Seconds(1);

std::string Quote(const std::string& key) { return absl::StrCat("'", absl::CHexEscape(key), "'"); }

KeyValue FromProto(const mvccpb::KeyValue& kv) {
  KeyValue out;
  out.key = kv.key();
  out.value = kv.value();
  out.create_revision = kv.create_revision();
  out.mod_revision = kv.mod_revision();
  out.version = kv.version();
  out.lease = kv.lease();
  return out;
}

// The first key after every key that starts with `prefix` (etcd's range_end for a prefix):
// the prefix with its last byte below 0xff incremented and what follows dropped. "\0" (every
// key to the end) when there is no such byte, as for an empty prefix.
std::string PrefixEnd(const std::string& prefix) {
  std::string end = prefix;
  while (!end.empty()) {
    unsigned char& last = reinterpret_cast<unsigned char&>(end.back());
    if (last < 0xff) {
      ++last;
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');
}

bool FailsOver(grpc::StatusCode code) {
  return code == grpc::StatusCode::UNAVAILABLE || code == grpc::StatusCode::DEADLINE_EXCEEDED;
}

absl::Status EmptyKey(absl::string_view call) {
  return absl::InvalidArgumentError(absl::StrCat("etcd ", call, ": empty key"));
}

}  // namespace

struct EtcdClient::Channels {
  struct Endpoint {
    std::string address;
    std::shared_ptr<grpc::Channel> channel;
    std::unique_ptr<pb::KV::Stub> kv;
    std::unique_ptr<pb::Lease::Stub> lease;
    std::unique_ptr<pb::Watch::Stub> watch;
  };
  std::vector<Endpoint> endpoints;
  // The endpoint that answered last: where the next call starts.
  std::atomic<size_t> preferred{0};
  absl::Duration call_timeout;
  std::atomic<bool> stopping{false};
  std::thread keeper;

  ~Channels() {
    stopping.store(true);
    if (keeper.joinable()) keeper.join();
  }

  // The keeper's body. Calls fail fast while an endpoint is down, so no call waits on its
  // channel while it reconnects, and a connection attempt only makes progress while some
  // thread polls the channel (else gRPC's backup poller, every 5 s, longer than a connect
  // attempt may take). This thread watches every channel's state, asking each to connect, so
  // a channel is ready again as soon as its etcd is back. It wakes every kKeeperTick at most.
  void KeepConnected() {
    SetThreadName("etcd-connect");
    grpc::CompletionQueue cq;
    auto arm = [&](size_t i) {
      grpc::Channel& channel = *endpoints[i].channel;
      channel.NotifyOnStateChange(channel.GetState(/*try_to_connect=*/true),
                                  absl::ToChronoTime(absl::Now() + kKeeperTick), &cq,
                                  reinterpret_cast<void*>(i));
    };
    for (size_t i = 0; i < endpoints.size(); ++i) arm(i);
    size_t pending = endpoints.size();
    void* tag = nullptr;
    bool ok = false;
    while (pending > 0 && cq.Next(&tag, &ok)) {
      --pending;
      if (stopping.load()) continue;  // let the others come back, arm nothing new
      arm(reinterpret_cast<size_t>(tag));
      ++pending;
    }
    cq.Shutdown();
    while (cq.Next(&tag, &ok)) {
    }
  }

  using Call = std::function<grpc::Status(Endpoint&, grpc::ClientContext*)>;
  // Runs `call` with a fresh context and deadline on the preferred endpoint, then on each other
  // one while the last answered UNAVAILABLE or DEADLINE_EXCEEDED. `what` names the call in
  // errors.
  absl::Status Invoke(absl::string_view what, const Call& call) {
    const size_t n = endpoints.size();
    const size_t first = preferred.load(std::memory_order_relaxed);
    std::string failures;
    absl::StatusCode code = absl::StatusCode::kUnavailable;
    for (size_t k = 0; k < n; ++k) {
      const size_t i = (first + k) % n;
      Endpoint& endpoint = endpoints[i];
      grpc::ClientContext context;
      context.set_deadline(absl::ToChronoTime(absl::Now() + call_timeout));
      const grpc::Status status = call(endpoint, &context);
      if (status.ok()) {
        preferred.store(i, std::memory_order_relaxed);
        return absl::OkStatus();
      }
      const absl::Status converted = FromGrpcStatus(status);
      if (!FailsOver(status.error_code())) {
        return absl::Status(converted.code(), absl::StrCat("etcd ", what, " at ", endpoint.address,
                                                           ": ", converted.message()));
      }
      code = converted.code();
      absl::StrAppend(&failures, failures.empty() ? "" : "; ", endpoint.address, ": ",
                      absl::StatusCodeToString(code), ": ", converted.message());
    }
    return absl::Status(code,
                        absl::StrCat("etcd ", what, ": no endpoint answered (", failures, ")"));
  }
};

EtcdClient::EtcdClient(std::vector<std::string> endpoints, absl::Duration call_timeout,
                       std::shared_ptr<Channels> channels)
    : endpoints_(std::move(endpoints)),
      call_timeout_(call_timeout),
      channels_(std::move(channels)) {}

EtcdClient::~EtcdClient() = default;

absl::StatusOr<std::unique_ptr<EtcdClient>> EtcdClient::Create(Options options) {
  if (options.endpoints.empty()) return absl::InvalidArgumentError("etcd client: no endpoint");
  if (options.call_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat("etcd client: call_timeout ",
                                                   absl::FormatDuration(options.call_timeout),
                                                   " is not positive"));
  }
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  if (options.tls.enabled()) {
    absl::StatusOr<TlsMaterial> m =
        TlsMaterial::Load({options.tls.cert, options.tls.key, options.tls.ca},
                          "etcd --cluster-tls-cert", "etcd --cluster-tls-key",
                          "etcd --cluster-tls-ca");
    if (!m.ok()) return m.status();
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = m->ca_pem;
    ssl.pem_private_key = m->key_pem;
    ssl.pem_cert_chain = m->cert_pem;
    credentials = grpc::SslCredentials(ssl);
  }
  auto channels = std::make_shared<Channels>();
  channels->call_timeout = options.call_timeout;
  for (const std::string& address : options.endpoints) {
    absl::StatusOr<HostPort> hp = SplitHostPort(address);
    if (!hp.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("etcd client: endpoint: ", hp.status().message()));
    }
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, kInitialReconnectMs);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, kMaxReconnectMs);
    args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, kMinConnectTimeoutMs);
    args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, kKeepaliveTimeMs);
    args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, kKeepaliveTimeoutMs);
    args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 0);
    args.SetMaxReceiveMessageSize(kMaxReceiveBytes);
    // This client's connections (and their backoff state) are its own, not shared with other
    // channels of the process to the same address.
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    Channels::Endpoint endpoint;
    endpoint.address = JoinHostPort(hp->host, hp->port);
    endpoint.channel =
        grpc::CreateCustomChannel(endpoint.address, credentials, args);
    endpoint.kv = pb::KV::NewStub(endpoint.channel);
    endpoint.lease = pb::Lease::NewStub(endpoint.channel);
    endpoint.watch = pb::Watch::NewStub(endpoint.channel);
    channels->endpoints.push_back(std::move(endpoint));
  }
  channels->keeper = std::thread([c = channels.get()] { c->KeepConnected(); });
  return std::unique_ptr<EtcdClient>(
      new EtcdClient(std::move(options.endpoints), options.call_timeout, std::move(channels)));
}

const std::vector<std::string>& EtcdClient::endpoints() const { return endpoints_; }

absl::Status EtcdClient::Put(const std::string& key, const std::string& value, int64_t lease) {
  if (key.empty()) return EmptyKey("Put");
  pb::PutRequest request;
  request.set_key(key);
  request.set_value(value);
  request.set_lease(lease);
  return channels_->Invoke(absl::StrCat("Put ", Quote(key)),
                           [&](Channels::Endpoint& e, grpc::ClientContext* context) {
                             pb::PutResponse response;
                             return e.kv->Put(context, request, &response);
                           });
}

absl::StatusOr<bool> EtcdClient::PutIfAbsent(const std::string& key, const std::string& value) {
  if (key.empty()) return EmptyKey("PutIfAbsent");
  pb::TxnRequest request;
  pb::Compare* absent = request.add_compare();
  absent->set_key(key);
  absent->set_target(pb::Compare::CREATE);
  absent->set_result(pb::Compare::EQUAL);
  absent->set_create_revision(0);
  pb::PutRequest* put = request.add_success()->mutable_request_put();
  put->set_key(key);
  put->set_value(value);
  pb::TxnResponse response;
  absl::Status status = channels_->Invoke(absl::StrCat("PutIfAbsent ", Quote(key)),
                                          [&](Channels::Endpoint& e, grpc::ClientContext* context) {
                                            return e.kv->Txn(context, request, &response);
                                          });
  if (!status.ok()) return status;
  return response.succeeded();
}

absl::StatusOr<std::optional<KeyValue>> EtcdClient::Get(const std::string& key) {
  if (key.empty()) return EmptyKey("Get");
  pb::RangeRequest request;
  request.set_key(key);
  pb::RangeResponse response;
  absl::Status status = channels_->Invoke(absl::StrCat("Get ", Quote(key)),
                                          [&](Channels::Endpoint& e, grpc::ClientContext* context) {
                                            return e.kv->Range(context, request, &response);
                                          });
  if (!status.ok()) return status;
  if (response.kvs_size() == 0) return std::optional<KeyValue>();
  return std::optional<KeyValue>(FromProto(response.kvs(0)));
}

absl::StatusOr<std::vector<KeyValue>> EtcdClient::GetPrefix(const std::string& prefix,
                                                            int64_t* revision) {
  pb::RangeRequest request;
  request.set_key(prefix.empty() ? std::string(1, '\0') : prefix);
  request.set_range_end(PrefixEnd(prefix));
  pb::RangeResponse response;
  absl::Status status = channels_->Invoke(absl::StrCat("GetPrefix ", Quote(prefix)),
                                          [&](Channels::Endpoint& e, grpc::ClientContext* context) {
                                            return e.kv->Range(context, request, &response);
                                          });
  if (!status.ok()) return status;
  std::vector<KeyValue> out;
  out.reserve(response.kvs_size());
  for (const mvccpb::KeyValue& kv : response.kvs()) out.push_back(FromProto(kv));
  if (revision != nullptr) *revision = response.header().revision();
  return out;
}

absl::Status EtcdClient::Delete(const std::string& key) {
  if (key.empty()) return EmptyKey("Delete");
  pb::DeleteRangeRequest request;
  request.set_key(key);
  return channels_->Invoke(absl::StrCat("Delete ", Quote(key)),
                           [&](Channels::Endpoint& e, grpc::ClientContext* context) {
                             pb::DeleteRangeResponse response;
                             return e.kv->DeleteRange(context, request, &response);
                           });
}

absl::Status EtcdClient::Compact(int64_t revision) {
  pb::CompactionRequest request;
  request.set_revision(revision);
  return channels_->Invoke(absl::StrCat("Compact ", revision),
                           [&](Channels::Endpoint& e, grpc::ClientContext* context) {
                             pb::CompactionResponse response;
                             return e.kv->Compact(context, request, &response);
                           });
}

absl::StatusOr<int64_t> EtcdClient::GrantLease(absl::Duration ttl) {
  if (ttl <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("etcd GrantLease: ttl ", absl::FormatDuration(ttl), " is not positive"));
  }
  pb::LeaseGrantRequest request;
  request.set_ttl(absl::ToInt64Seconds(absl::Ceil(ttl, absl::Seconds(1))));
  pb::LeaseGrantResponse response;
  absl::Status status = channels_->Invoke(absl::StrCat("GrantLease ", absl::FormatDuration(ttl)),
                                          [&](Channels::Endpoint& e, grpc::ClientContext* context) {
                                            return e.lease->LeaseGrant(context, request, &response);
                                          });
  if (!status.ok()) return status;
  if (!response.error().empty()) {
    return absl::InternalError(absl::StrCat("etcd GrantLease: ", response.error()));
  }
  return response.id();
}

namespace {

absl::Status LeaseGone(absl::string_view call, int64_t lease) {
  return absl::NotFoundError(
      absl::StrCat("etcd ", call, ": lease ", absl::Hex(lease), " not found (expired or revoked)"));
}

}  // namespace

absl::StatusOr<absl::Duration> EtcdClient::KeepAliveOnce(int64_t lease) {
  pb::LeaseKeepAliveRequest request;
  request.set_id(lease);
  pb::LeaseKeepAliveResponse response;
  absl::Status status = channels_->Invoke(
      absl::StrCat("KeepAliveOnce ", absl::Hex(lease)),
      [&](Channels::Endpoint& e, grpc::ClientContext* context) {
        // etcd's keepalive is a stream: one request, one answer, then our side's end makes
        // the server end it too.
        std::unique_ptr<
            grpc::ClientReaderWriter<pb::LeaseKeepAliveRequest, pb::LeaseKeepAliveResponse>>
            stream = e.lease->LeaseKeepAlive(context);
        if (stream->Write(request)) {
          stream->WritesDone();
          stream->Read(&response);
        }
        return stream->Finish();
      });
  if (!status.ok()) return status;
  if (response.ttl() <= 0) return LeaseGone("KeepAliveOnce", lease);
  return absl::Seconds(response.ttl());
}

absl::StatusOr<absl::Duration> EtcdClient::TimeToLive(int64_t lease) {
  pb::LeaseTimeToLiveRequest request;
  request.set_id(lease);
  pb::LeaseTimeToLiveResponse response;
  absl::Status status =
      channels_->Invoke(absl::StrCat("TimeToLive ", absl::Hex(lease)),
                        [&](Channels::Endpoint& e, grpc::ClientContext* context) {
                          return e.lease->LeaseTimeToLive(context, request, &response);
                        });
  if (!status.ok()) return status;
  // etcd answers TTL -1 rather than an error for a lease it no longer has.
  if (response.ttl() < 0) return LeaseGone("TimeToLive", lease);
  return absl::Seconds(response.ttl());
}

absl::Status EtcdClient::RevokeLease(int64_t lease) {
  pb::LeaseRevokeRequest request;
  request.set_id(lease);
  return channels_->Invoke(absl::StrCat("RevokeLease ", absl::Hex(lease)),
                           [&](Channels::Endpoint& e, grpc::ClientContext* context) {
                             pb::LeaseRevokeResponse response;
                             return e.lease->LeaseRevoke(context, request, &response);
                           });
}

namespace {

// One watch: a thread that holds a Watch stream open on one endpoint at a time and opens a new
// one, from the next revision it has not delivered, whenever the stream ends.
class PrefixWatch final : public EtcdClient::Watch {
 public:
  PrefixWatch(std::shared_ptr<EtcdClient::Channels> channels, std::string prefix,
              int64_t start_revision, std::function<void(const WatchEvent&)> on_event,
              std::function<void(const absl::Status&)> on_error)
      : channels_(std::move(channels)),
        prefix_(std::move(prefix)),
        next_revision_(start_revision > 0 ? start_revision + 1 : 0),
        on_event_(std::move(on_event)),
        on_error_(std::move(on_error)) {
    thread_ = std::thread([this] { Run(); });
  }

  ~PrefixWatch() override {
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
      if (context_ != nullptr) context_->TryCancel();
    }
    thread_.join();
  }

 private:
  void Run();
  // One stream on `endpoint` until it ends; its end status. Sets *established once etcd has
  // confirmed the watch.
  absl::Status Stream(EtcdClient::Channels::Endpoint& endpoint, bool* established);
  void Report(const absl::Status& status) {
    if (on_error_) on_error_(status);
  }

  const std::shared_ptr<EtcdClient::Channels> channels_;
  const std::string prefix_;
  // etcd's start_revision for the next stream; 0 until the first one is established.
  // Touched by the watch thread only.
  int64_t next_revision_;
  // A loss was reported and no recovery yet. Watch thread only.
  bool lost_ = false;
  const std::function<void(const WatchEvent&)> on_event_;
  const std::function<void(const absl::Status&)> on_error_;
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  grpc::ClientContext* context_ ABSL_GUARDED_BY(mu_) = nullptr;  // the open stream's
  std::thread thread_;
};

void PrefixWatch::Run() {
  SetThreadName("etcd-watch");
  const size_t n = channels_->endpoints.size();
  size_t index = channels_->preferred.load(std::memory_order_relaxed);
  absl::Duration retry = kWatchRetryFirst;
  for (;;) {
    EtcdClient::Channels::Endpoint& endpoint = channels_->endpoints[index % n];
    bool established = false;
    const absl::Status end = Stream(endpoint, &established);
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
    }
    if (established) retry = kWatchRetryFirst;
    if (end.code() == absl::StatusCode::kDataLoss) {
      Report(end);  // compacted: go on at once from what etcd still has
      continue;
    }
    if (!lost_) {
      lost_ = true;
      Report(absl::Status(
          end.code(),
          absl::StrCat("etcd watch of ", Quote(prefix_), " at ", endpoint.address, " lost (",
                       end.message(), "); re-establishing from revision ", next_revision_)));
    }
    ++index;
    absl::MutexLock lock(&mu_);
    // Woken early only by the destructor.
    mu_.AwaitWithTimeout(absl::Condition(&stopping_), retry);
    if (stopping_) return;
    retry = std::min(retry * 2, kWatchRetryMax);
  }
}

absl::Status PrefixWatch::Stream(EtcdClient::Channels::Endpoint& endpoint, bool* established) {
  grpc::ClientContext context;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return absl::CancelledError("watch stopped");
    context_ = &context;
  }
  absl::Status end;
  {
    auto stream = endpoint.watch->Watch(&context);
    pb::WatchRequest request;
    pb::WatchCreateRequest* create = request.mutable_create_request();
    create->set_key(prefix_.empty() ? std::string(1, '\0') : prefix_);
    create->set_range_end(PrefixEnd(prefix_));
    create->set_start_revision(next_revision_);
    create->set_progress_notify(true);
    pb::WatchResponse response;
    if (stream->Write(request)) {
      while (stream->Read(&response)) {
        if (response.canceled()) {
          if (response.compact_revision() > 0) {
            end = absl::DataLossError(absl::StrCat(
                "etcd watch of ", Quote(prefix_), ": revisions ", next_revision_, " to ",
                response.compact_revision() - 1,
                " were compacted away; their changes are lost, re-read with GetPrefix"));
            next_revision_ = response.compact_revision();
          } else {
            end = absl::UnavailableError(
                absl::StrCat("etcd cancelled the watch: ", response.cancel_reason()));
          }
          context.TryCancel();  // the stream's CANCELLED end is ours; `end` says why
          break;
        }
        if (response.created()) {
          *established = true;
          // From now: the first revision after the one etcd was at when it took the watch.
          if (next_revision_ == 0) next_revision_ = response.header().revision() + 1;
          if (lost_) {
            lost_ = false;
            Report(absl::OkStatus());
          }
          continue;
        }
        if (response.events_size() == 0) {
          // A progress notification: every change up to the header's revision was delivered.
          next_revision_ = std::max(next_revision_, response.header().revision() + 1);
          continue;
        }
        for (const mvccpb::Event& e : response.events()) {
          WatchEvent event{
              e.type() == mvccpb::Event::DELETE ? WatchEvent::kDelete : WatchEvent::kPut,
              FromProto(e.kv())};
          next_revision_ = std::max(next_revision_, event.kv.mod_revision + 1);
          on_event_(event);
        }
      }
    }
    const grpc::Status status = stream->Finish();
    if (end.ok()) {
      end = status.ok() ? absl::UnavailableError("the stream ended") : FromGrpcStatus(status);
    }
  }
  absl::MutexLock lock(&mu_);
  context_ = nullptr;
  return end;
}

}  // namespace

std::unique_ptr<EtcdClient::Watch> EtcdClient::WatchPrefix(
    const std::string& prefix, int64_t start_revision,
    std::function<void(const WatchEvent&)> on_event,
    std::function<void(const absl::Status&)> on_error) {
  return std::make_unique<PrefixWatch>(channels_, prefix, start_revision, std::move(on_event),
                                       std::move(on_error));
}

}  // namespace gdr::etcd
