// Store's buffer calls (store.h), made on the Client that registers the Store's memory, and
// the registration test every Store's ops make of a Buffer (ClientAccess::Registered).
#include "gdrstore/store.h"

#include "client/src/client_access.h"
#include "client/src/registration.h"
#include "common/base/status_macros.h"
#include "gdrstore/client.h"

namespace gdrstore {

absl::StatusOr<std::unique_ptr<Buffer>> Store::AllocateBuffer(size_t bytes) {
  GDR_ASSIGN_OR_RETURN(Client * client, RegisteringClient());
  return client->AllocateBuffer(bytes);
}

absl::StatusOr<std::unique_ptr<Buffer>> Store::AllocateGpuBuffer(const std::string& gpu,
                                                                 size_t bytes) {
  GDR_ASSIGN_OR_RETURN(Client * client, RegisteringClient());
  return client->AllocateGpuBuffer(gpu, bytes);
}

absl::StatusOr<std::unique_ptr<Buffer>> Store::RegisterHostMemory(void* p, size_t bytes) {
  GDR_ASSIGN_OR_RETURN(Client * client, RegisteringClient());
  return client->RegisterHostMemory(p, bytes);
}

absl::StatusOr<std::unique_ptr<Buffer>> Store::RegisterGpuMemory(uint64_t device_ptr,
                                                                 size_t bytes) {
  GDR_ASSIGN_OR_RETURN(Client * client, RegisteringClient());
  return client->RegisterGpuMemory(device_ptr, bytes);
}

}  // namespace gdrstore

namespace gdr {

bool ClientAccess::Registered(const gdrstore::Client& client, const gdrstore::Buffer& buffer) {
  return client.registrations_->Holds(*buffer.registration_);
}

bool ClientAccess::RefuseForeign(const gdrstore::Client& client, const gdrstore::Buffer& buffer,
                                 gdrstore::OpCallback& done) {
  if (Registered(client, buffer)) return true;
  done(absl::InvalidArgumentError(
      "the buffer was registered by another Client or ClusterClient: register it with this one"));
  return false;
}

}  // namespace gdr
