#include "common/verbs/verbs_ptr.h"

#include <cstring>

#include "common/base/log.h"

namespace gdr::verbs {
namespace {

// Destroy calls return 0 or an errno value (some providers return -1 and set errno).
void LogIfFailed(int rc, const char* call) {
  if (rc == 0) return;
  const int err = rc > 0 ? rc : errno;
  GDR_LOG(kError) << call << " failed: " << std::strerror(err) << " (errno " << err
                  << "); the object leaks until the process exits";
}

}  // namespace

void VerbsDeleter::operator()(ibv_context* p) const {
  if (p) LogIfFailed(ibv_close_device(p), "ibv_close_device");
}
void VerbsDeleter::operator()(ibv_pd* p) const {
  if (p) LogIfFailed(ibv_dealloc_pd(p), "ibv_dealloc_pd");
}
void VerbsDeleter::operator()(ibv_comp_channel* p) const {
  if (p) LogIfFailed(ibv_destroy_comp_channel(p), "ibv_destroy_comp_channel");
}
void VerbsDeleter::operator()(ibv_cq* p) const {
  if (p) LogIfFailed(ibv_destroy_cq(p), "ibv_destroy_cq");
}
void VerbsDeleter::operator()(ibv_qp* p) const {
  if (p) LogIfFailed(ibv_destroy_qp(p), "ibv_destroy_qp");
}
void VerbsDeleter::operator()(ibv_mr* p) const {
  if (p) LogIfFailed(ibv_dereg_mr(p), "ibv_dereg_mr");
}
void VerbsDeleter::operator()(ibv_ah* p) const {
  if (p) LogIfFailed(ibv_destroy_ah(p), "ibv_destroy_ah");
}
void VerbsDeleter::operator()(ibv_device** p) const {
  if (p) ibv_free_device_list(p);
}

}  // namespace gdr::verbs
