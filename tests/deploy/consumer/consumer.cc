// A C++ program outside the tree, built against the installed libgdrclient (pkg-config or
// find_package): registers its own memory, gets a volume's bytes into it and checks the first
// of them against a byte fetched a second way. Usage: consumer HOST:PORT VOLUME.
#include <gdrstore/client.h>

#include <cstdio>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 3) return 2;
  gdrstore::ClientOptions o;
  o.daemon_address = argv[1];
  auto client = gdrstore::Client::Connect(o);
  if (!client.ok()) {
    std::printf("FAIL: connect: %s\n", std::string(client.status().message()).c_str());
    return 1;
  }
  std::vector<std::byte> mine(1 << 20), again(4096);
  auto buf = (*client)->RegisterHostMemory(mine.data(), mine.size());
  auto small = (*client)->AllocateBuffer(again.size());
  if (!buf.ok() || !small.ok()) {
    std::printf("FAIL: register\n");
    return 1;
  }
  if (!(*client)->Write({argv[2], 0, mine.size()}, **buf).ok() ||
      !(*client)->Write({argv[2], 0, again.size()}, **small).ok()) {
    std::printf("FAIL: get\n");
    return 1;
  }
  for (size_t i = 0; i < again.size(); ++i) {
    if ((*small)->data()[i] != mine[i]) {
      std::printf("FAIL: byte %zu differs between two gets of the same extent\n", i);
      return 1;
    }
  }
  auto info = (*client)->GetInfo();
  std::printf("C++ consumer PASSED (%d volumes)\n", info.ok() ? info->volumes_size() : -1);
  return info.ok() ? 0 : 1;
}
