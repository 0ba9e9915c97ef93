// gdragent entry point: parses the settings and runs the Agent (agent/agent.h), which connects
// to the storage daemon, listens on the Unix socket and serves until SIGTERM.
#include "agent/agent.h"
#include "agent/agent_config.h"
#include "common/process/service_main.h"

int main(int argc, char** argv) {
  return gdr::RunService("gdragent", argc, argv, gdr::agent::ParseAgentConfig,
                         [](gdr::agent::AgentConfig config) {
                           return gdr::agent::Agent::Start(std::move(config));
                         });
}
