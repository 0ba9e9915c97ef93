// A client process for the handoff tests: connects to a handoff server's socket, registers
// REGIONS sealed memfds of SIZE bytes each holding PeerByte(region, i), prints what the test
// needs to resolve them, then waits to be killed (its session lives as long as it does).
//   handoff_peer PATH NAME REGIONS SIZE
// stdout: "session <hex> key <32 hex>", one "region <index> <rkey hex> <address hex> <size>" per
// region, then "ready"; or "error <code name>: <message>" and exit 3.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "common/handoff/handoff_client.h"
#include "tests/common/handoff/peer_bytes.h"

namespace {

int Fail(const absl::Status& s) {
  std::printf("error %s: %s\n", absl::StatusCodeToString(s.code()).c_str(),
              std::string(s.message()).c_str());
  std::fflush(stdout);
  return 3;
}

}  // namespace

int main(int argc, char** argv) {
  uint32_t regions = 0;
  uint64_t size = 0;
  if (argc != 5 || !absl::SimpleAtoi(argv[3], &regions) || !absl::SimpleAtoi(argv[4], &size) ||
      size == 0) {
    std::fprintf(stderr, "usage: handoff_peer PATH NAME REGIONS SIZE\n");
    return 2;
  }
  auto client = gdr::handoff::HandoffClient::Connect(argv[1], argv[2], absl::Seconds(30));
  if (!client.ok()) return Fail(client.status());
  std::printf("session %016lx key %s\n", static_cast<unsigned long>((*client)->session()),
              absl::BytesToHexString((*client)->key()).c_str());
  std::vector<gdr::handoff::test::SealedMemfd> held;  // mapped for the process's life
  for (uint32_t r = 0; r < regions; ++r) {
    absl::StatusOr<gdr::handoff::test::SealedMemfd> m = gdr::handoff::test::MakeSealedMemfd(size);
    if (!m.ok()) return Fail(m.status());
    for (uint64_t i = 0; i < size; ++i) m->bytes[i] = gdr::handoff::test::PeerByte(r, i);
    gdr::handoff::Register reg;
    reg.kind = gdr::handoff::MemoryKind::kHostMemfd;
    reg.address = reinterpret_cast<uint64_t>(m->bytes);
    reg.size = size;
    absl::StatusOr<uint32_t> rkey = (*client)->Register(reg, m->fd.get());
    if (!rkey.ok()) return Fail(rkey.status());
    std::printf("region %u %08x %lx %lu\n", r, *rkey, static_cast<unsigned long>(reg.address),
                static_cast<unsigned long>(size));
    m->fd.Reset();  // the server holds its own reference
    held.push_back(*std::move(m));
  }
  std::printf("ready\n");
  std::fflush(stdout);
  for (;;) ::pause();
}
