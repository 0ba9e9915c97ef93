// The library's own way into a Client and its Buffers: how an op is dispatched over the
// transport's rails (unary calls and the Stream share it), and a Client for another daemon that
// shares an open Client's transport and registrations (the cluster client's members). Kept out
// of the public header: callers see neither.
#pragma once

#include <functional>
#include <memory>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "client/src/registration.h"
#include "client/src/transport/client_transport.h"
#include "client/src/transport/region.h"
#include "common/wire/volume_name.h"
#include "gdrstore/client.h"
#include "gdrstore/v1/gdrstore.grpc.pb.h"

namespace gdr {

class ClientAccess {
 public:
  // Sends an op as one piece, or as slices over the rails (retried once on another rail);
  // `piece(extent, buffer_offset, rail, done)` submits one piece on a rail. `done` runs once,
  // for the whole op, with the path it took (OpResult::path) checked against
  // ClientOptions::require, and with `crc32c` the answer's CRC32C checked against the buffer.
  // One rail calls `piece` directly: nothing is kept for a retry.
  template <typename Piece>
  static void Dispatch(gdrstore::Client& client, const gdrstore::Extent& extent,
                       const gdrstore::Buffer& buffer, size_t buffer_offset, bool crc32c,
                       gdrstore::OpCallback done, Piece&& piece) {
    // Checked before it is sent: a name that is not UTF-8 fails the request's parsing in the
    // daemon, which answers an unnamed UNIMPLEMENTED.
    if (!IsVolumeNameSyntax(extent.volume)) {
      done(absl::InvalidArgumentError(absl::StrCat(
          "extent.volume '", ShownVolumeName(extent.volume), "' must be ", kVolumeNameRule)));
      return;
    }
    if (client.transport_->rail_count() == 1) {
      if (crc32c) {
        done = CrcChecked(buffer, buffer_offset, extent.length, std::move(done));
      }
      piece(extent, buffer_offset, 0, PathNamed(client, buffer, 0, std::move(done)));
      return;
    }
    DispatchSlices(client, extent, buffer, buffer_offset, crc32c, std::move(done),
                   PieceSubmit(std::forward<Piece>(piece)));
  }

  // A Client for the daemon at `daemon_address` that reaches this process's memory through
  // `base`'s transport (AttachClientTransport: the same tcp target, the same device, rc
  // connected anew) and shares its registrations, so a Buffer registered on either serves
  // both, and its deadline thread. Its own channel, admission window and Streams. `base` must
  // outlive it. The channel's errors (OpenDaemonChannel), the attach's (rc's Connect).
  static absl::StatusOr<std::unique_ptr<gdrstore::Client>> ConnectSharing(
      const gdrstore::Client& base, const std::string& daemon_address);

  // Applies `options` to `*kind` (sync: a put that waits for msync). False once `done` has
  // been answered INVALID_ARGUMENT naming the option that does not fit the op.
  static bool ApplyOptions(const gdrstore::OpOptions& options, gdrstore::OpKind* kind,
                           gdrstore::OpCallback& done);
  // The Client's stub (daemon_rpc.h's DaemonStub).
  static gdrstore::v1::GdrStore::Stub* Stub(const gdrstore::Client& client);
  // Whether `client`'s registrations (shared by the Clients sharing its transport) hold
  // `buffer`'s: a ClusterClient's test that a Buffer is its own.
  static bool Registered(const gdrstore::Client& client, const gdrstore::Buffer& buffer);
  // Registered, else `done` gets INVALID_ARGUMENT naming why and false is returned: another
  // Client's memory is reached only through its transport (another tcp target, device).
  static bool RefuseForeign(const gdrstore::Client& client, const gdrstore::Buffer& buffer,
                            gdrstore::OpCallback& done);

  static const Region& region(const gdrstore::Buffer& buffer) {
    return *buffer.registration_->region();
  }

 private:
  using PieceSubmit = std::function<void(const gdrstore::Extent&, size_t buffer_offset, int rail,
                                         gdrstore::OpCallback)>;
  // `done` with the path the piece on `rail` took (this client's hop, then what the server
  // says lies beyond) and, when the client has a requirement, the op failed unless the path
  // meets it.
  static gdrstore::OpCallback PathNamed(const gdrstore::Client& client,
                                        const gdrstore::Buffer& buffer, int rail,
                                        gdrstore::OpCallback done);
  // The same with the client's transport and requirement (what PathNamed holds), for code
  // that may run after the Client has gone.
  static gdrstore::OpCallback PathNamed(std::shared_ptr<ClientTransport> transport,
                                        std::shared_ptr<const Requirement> required,
                                        const gdrstore::Buffer& buffer, int rail,
                                        gdrstore::OpCallback done);
  // `done` behind a check of the answer's CRC32C against `length` bytes of `buffer` at `offset`.
  static gdrstore::OpCallback CrcChecked(const gdrstore::Buffer& buffer, size_t offset,
                                         uint64_t length, gdrstore::OpCallback done);
  static void DispatchSlices(gdrstore::Client& client, const gdrstore::Extent& extent,
                             const gdrstore::Buffer& buffer, size_t buffer_offset, bool crc32c,
                             gdrstore::OpCallback done, PieceSubmit piece);
};

}  // namespace gdr
