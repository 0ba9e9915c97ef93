// A C++ program outside the tree, built against the installed libgdrclient (pkg-config or
// find_package): registers its own memory, gets a volume's bytes into it and checks the first
// of them against a byte fetched a second way. Usage: consumer HOST:PORT VOLUME.
#include <gdrstore/client.h>
#include <gdrstore/cluster.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
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
  // The same bytes through the cluster API: one member, R = 1, so the layout maps logical
  // bytes onto the member's volume one to one.
  char path[] = "/tmp/gdr-consumer-XXXXXX";
  const int fd = mkstemp(path);
  if (fd < 0) return 1;
  close(fd);
  {
    std::ofstream f(path);
    f << "{\"members\": [{\"id\": \"a\", \"address\": \"" << argv[1] << "\"}], "
      << "\"volumes\": [{\"name\": \"" << argv[2] << "\", \"stripe_unit\": 4096, "
      << "\"members\": [\"a\"], \"replicas\": 1, \"size\": 4096}]}";
  }
  gdrstore::ClusterOptions co;
  co.members_file = path;
  auto cluster = gdrstore::ClusterClient::Open(co);
  bool cluster_ok = false;
  if (cluster.ok()) {
    auto cbuf = (*cluster)->AllocateBuffer(4096);
    cluster_ok = cbuf.ok() && (*cluster)->Get(argv[2], 0, 4096, **cbuf).ok();
    for (size_t i = 0; cluster_ok && i < 4096; ++i) cluster_ok = (*cbuf)->data()[i] == mine[i];
  }
  std::remove(path);
  if (!cluster_ok) {
    std::printf("FAIL: the cluster get differs or failed: %s\n",
                cluster.ok() ? "bytes" : std::string(cluster.status().message()).c_str());
    return 1;
  }
  auto info = (*client)->GetInfo();
  std::printf("C++ consumer PASSED (%d volumes)\n", info.ok() ? info->volumes_size() : -1);
  return info.ok() ? 0 : 1;
}
