// Parsing a service's command line (gdrstored's, gdragent's) into the Status its main expects
// (RunService, service_main.h): --help and --version answered as CANCELLED with their text, a
// bad flag as INVALID_ARGUMENT.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

#include "absl/status/status.h"

namespace gdr {

// Parses argc/argv into `app`'s options. CANCELLED carrying app.help() for --help (or
// --help-all), or `version_text` for --version where `app` has a version flag; INVALID_ARGUMENT
// with CLI11's message (which names the flag) for anything it refuses. Not thread-safe on `app`.
absl::Status ParseServiceFlags(CLI::App& app, int argc, char** argv,
                               const std::string& version_text = "");

}  // namespace gdr
