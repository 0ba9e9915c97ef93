// gdrctl's size and offset flags: each takes a byte count with an optional unit ("4096",
// "64KiB", "1MiB", "2GiB"), parsed by gdr::ParseSize, so -s and -o read alike everywhere.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

namespace gdrctl {

// Adds option `names` ("-o,--offset") to `app`, storing the parsed byte count in `*out` (whose
// value at the call is shown as the default). Text ParseSize refuses is a CLI::ValidationError
// whose message names the flag and says what is wrong ("-o,--offset: size '1XB' has unknown
// unit 'xb' (use B, KiB, MiB, GiB, TiB)"). `out` must outlive the parse.
CLI::Option* AddSizeOption(CLI::App* app, const std::string& names, uint64_t* out,
                           const std::string& description);

}  // namespace gdrctl
