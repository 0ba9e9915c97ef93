#include "common/grpc/grpc_lifetime.h"

#include <grpc/grpc.h>

namespace gdr {

void KeepGrpcInitialized() {
  static const bool initialized = [] {
    grpc_init();
    return true;
  }();
  (void)initialized;
}

}  // namespace gdr
