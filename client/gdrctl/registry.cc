// The list of gdrctl's commands: adding one is a file under commands/ and a line here.
#include "client/gdrctl/command.h"

namespace gdrctl {

// Each defined in commands/NAME_cmd.cc.
std::unique_ptr<Command> NewInfoCommand();
std::unique_ptr<Command> NewWriteCommand();
std::unique_ptr<Command> NewReadCommand();
std::unique_ptr<Command> NewBenchCommand();
std::unique_ptr<Command> NewClusterCommand();
std::unique_ptr<Command> NewTopoCommand();
std::unique_ptr<Command> NewSelftestCommand();
std::unique_ptr<Command> NewStatsCommand();
std::unique_ptr<Command> NewFaultCommand();
std::unique_ptr<Command> NewDoctorCommand();
std::unique_ptr<Command> NewReplayCommand();
std::unique_ptr<Command> NewTraceCommand();
std::unique_ptr<Command> NewVolumeCommand();
std::unique_ptr<Command> NewWorkloadCommand();

std::vector<std::unique_ptr<Command>> AllCommands() {
  std::vector<std::unique_ptr<Command>> all;
  for (auto make : {NewInfoCommand, NewWriteCommand, NewReadCommand, NewBenchCommand,
                    NewClusterCommand, NewTopoCommand, NewSelftestCommand, NewStatsCommand,
                    NewFaultCommand, NewDoctorCommand, NewReplayCommand, NewTraceCommand,
                    NewVolumeCommand, NewWorkloadCommand}) {
    all.push_back(make());
  }
  return all;
}

}  // namespace gdrctl
