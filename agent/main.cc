// gdragent entry point: parses the settings and runs the Agent (agent/agent.h), which connects
// to the storage daemon, listens on the Unix socket and serves until SIGTERM. `gdragent health`
// instead probes a running agent (agent/health_check.h).
#include <cstring>

#include "agent/agent.h"
#include "agent/agent_config.h"
#include "agent/health_check.h"
#include "common/process/service_main.h"

int main(int argc, char** argv) {
  if (argc >= 2 && std::strcmp(argv[1], "health") == 0) {
    return gdr::agent::RunHealthCheck(argc - 1, argv + 1);
  }
  return gdr::RunService("gdragent", argc, argv, gdr::agent::ParseAgentConfig,
                         [](gdr::agent::AgentConfig config) {
                           return gdr::agent::Agent::Start(std::move(config));
                         });
}
