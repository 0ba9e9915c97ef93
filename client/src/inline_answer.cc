#include "client/src/inline_answer.h"

#include "absl/strings/str_cat.h"

namespace gdr {

absl::Status UnaskedInlineAnswer(size_t bytes) {
  return absl::DataLossError(absl::StrCat("the daemon answered with ", bytes,
                                          " inline bytes an op that did not ask for them"));
}

absl::Status TakeInlineAnswer(const gdrstore::Buffer& buffer, size_t offset, uint64_t length,
                              bool asked, const std::string& data) {
  if (!asked) return UnaskedInlineAnswer(data.size());
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
