// Writes one of fake_host.h's hosts for tests that run the real gdrctl binary on it:
//   fake_host_tree DIR healthy|faulty   -> DIR/sys and DIR/proc
#include <cstdio>
#include <string>

#include "tests/client/gdrctl/fake_host.h"

int main(int argc, char** argv) {
  const std::string kind = argc == 3 ? argv[2] : "";
  if (kind == "healthy") {
    gdrctl::doctor::testing::WriteHealthyHost(argv[1]);
  } else if (kind == "faulty") {
    gdrctl::doctor::testing::WriteFaultyHost(argv[1]);
  } else {
    std::fprintf(stderr, "usage: %s DIR healthy|faulty\n", argv[0]);
    return 2;
  }
  return 0;
}
