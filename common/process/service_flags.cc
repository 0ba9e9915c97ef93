#include "common/process/service_flags.h"

namespace gdr {

absl::Status ParseServiceFlags(CLI::App& app, int argc, char** argv,
                               const std::string& version_text) {
  // CLI11 answers --help and --version by throwing; no exception leaves this function.
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return absl::CancelledError(app.help());
  } catch (const CLI::CallForAllHelp& e) {
    return absl::CancelledError(app.help());
  } catch (const CLI::CallForVersion& e) {
    return absl::CancelledError(version_text);
  } catch (const CLI::ParseError& e) {
    return absl::InvalidArgumentError(e.what());
  }
  return absl::OkStatus();
}

}  // namespace gdr
