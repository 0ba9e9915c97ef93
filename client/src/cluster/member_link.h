// One member as this process reaches it: a Client connected to its daemon and one Stream that
// carries every piece sent to it. Every link but the first shares the first one's transport
// (one tcp target, one device) and registrations, with a daemon channel of its own. A link
// whose stream failed opens a new one for the next piece; a member that failed is given a new
// link (a restarted daemon has no session of ours).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gdrstore/client.h"

namespace gdr::cluster {

class MemberLink {
 public:
  // Connects to `address`: with `options` (daemon_address replaced) when `share` is null, else
  // through `share`'s transport and registrations (which must outlive this link).
  // `generation` tells this link apart from an earlier link to the same member.
  static absl::StatusOr<std::unique_ptr<MemberLink>> Connect(const std::string& id,
                                                             const std::string& address,
                                                             gdrstore::ClientOptions options,
                                                             uint64_t generation,
                                                             const gdrstore::Client* share);
  ~MemberLink();

  // Sends one piece over the stream (opening it when there is none or it failed); `done`
  // runs once, by options.deadline at the latest (DEADLINE_EXCEEDED). `buffer` must be
  // registered with this link's client or one sharing its transport.
  void Submit(gdrstore::OpKind kind, const gdrstore::Extent& extent,
              const gdrstore::Buffer& buffer, size_t buffer_offset,
              const gdrstore::OpOptions& options, gdrstore::OpCallback done);

  gdrstore::Client& client() { return *client_; }
  const std::string& id() const { return id_; }
  const std::string& address() const { return address_; }
  uint64_t generation() const { return generation_; }

 private:
  MemberLink(std::string id, std::string address, uint64_t generation,
             std::unique_ptr<gdrstore::Client> client);
  std::string id_, address_;
  uint64_t generation_;
  std::unique_ptr<gdrstore::Client> client_;
  std::mutex mu_;
  std::shared_ptr<gdrstore::OpStream> stream_;
  std::vector<std::shared_ptr<gdrstore::OpStream>> retired_;  // failed; closed with the link
};

}  // namespace gdr::cluster
