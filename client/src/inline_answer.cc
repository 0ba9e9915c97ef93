#include "client/src/inline_answer.h"

#include "absl/strings/str_cat.h"

namespace gdr {

absl::Status TakeInlineAnswer(const gdrstore::Buffer& buffer, size_t offset, uint64_t length,
                              bool write, const std::string& data) {
  if (!write) {
    return absl::DataLossError(absl::StrCat("the daemon answered a Read with ", data.size(),
                                            " inline bytes; only Writes are answered inline"));
  }
  if (data.size() != length) {
    return absl::DataLossError(absl::StrCat("the daemon answered a ", length, "-byte Write with ",
                                            data.size(), " inline bytes"));
  }
  if (!buffer.writable()) {
    return absl::PermissionDeniedError("the buffer is read-only: a Write into it is refused");
  }
  return buffer.CopyIn(offset, data.data(), data.size());
}

}  // namespace gdr
