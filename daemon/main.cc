// gdrstored entry point: parses the settings (flags and config file) and runs the Daemon
// (daemon/ops/daemon.h), which builds every layer, serves, and hands over to the supervisor
// (systemd notify/watchdog, SIGHUP reload, SIGTERM drain) until it returns the exit code.
#include "common/process/service_main.h"
#include "daemon/ops/daemon.h"
#include "daemon/ops/daemon_config.h"

int main(int argc, char** argv) {
  return gdr::RunService("gdrstored", argc, argv, gdr::ParseDaemonConfig,
                         [argc, argv](gdr::DaemonConfig config) {
                           // argv is parsed again on SIGHUP (the config file is read again).
                           return gdr::Daemon::Start(std::move(config), argc, argv);
                         });
}
