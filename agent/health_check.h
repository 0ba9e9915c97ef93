// `gdragent health`: the agent's liveness as a probe sees it (Kubernetes' livenessProbe). It asks
// the running agent alone (a session on its socket, a channel, a Ping answered by the agent's own
// gRPC server) and never its storage daemons: storage that is down must not get every node's
// agent restarted under its running jobs (readiness, `gdrctl --agent SOCK info`, follows those).
#pragma once

namespace gdr::agent {

// The whole of `gdragent health [--socket PATH] [--timeout-ms MS]`; argv[0] is "health". Exit 0
// and one line on stdout when the agent answers; 1 with "gdragent health: <why>" on stderr
// (nothing listens, the agent refuses this uid, it does not answer within the timeout); 2 for
// bad flags.
int RunHealthCheck(int argc, char** argv);

}  // namespace gdr::agent
