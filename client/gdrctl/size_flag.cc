#include "client/gdrctl/size_flag.h"

#include "absl/strings/str_replace.h"
#include "common/base/units.h"

namespace gdrctl {

CLI::Option* AddSizeOption(CLI::App* app, const std::string& names, uint64_t* out,
                           const std::string& description) {
  CLI::Option* opt = app->add_option_function<std::string>(
      names,
      [out, names](const std::string& text) {
        absl::StatusOr<uint64_t> v = gdr::ParseSize(text);
        if (!v.ok()) throw CLI::ValidationError(names, std::string(v.status().message()));
        *out = *v;
      },
      description);
  opt->type_name("SIZE");
  // "4 KiB" -> "4KiB": the default reads the way the flag is typed.
  opt->default_str(absl::StrReplaceAll(gdr::FormatSize(*out), {{" ", ""}}));
  return opt;
}

}  // namespace gdrctl
