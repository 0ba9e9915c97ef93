// The handoff protocol's codec (common/wire/handoff_message.h): every message type survives
// Encode/Decode, and each field a hostile peer controls is refused with its name.
#include "common/wire/handoff_message.h"

#include <cstring>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gdr::handoff {
namespace {

using ::testing::HasSubstr;

// Byte offsets in a packet: the header, then REGISTER's body.
constexpr size_t kMagicAt = 0, kVersionAt = 4, kTypeAt = 6, kBodyLenAt = 12, kBody = 16;
constexpr size_t kKindAt = kBody, kFlagsAt = kBody + 1, kReservedAt = kBody + 2;

template <typename T>
void Patch(std::string& p, size_t at, T v) {
  ASSERT_LE(at + sizeof(T), p.size());
  std::memcpy(p.data() + at, &v, sizeof(T));
}

Register HostRegion() {
  Register r;
  r.kind = MemoryKind::kHostMemfd;
  r.writable = false;
  r.address = 0x7f0000001234;
  r.size = 1 << 20;
  r.offset = 4096;
  return r;
}

Register GpuRegion(MemoryKind kind) {
  Register r;
  r.kind = kind;
  r.address = 0x7f8000000000;
  r.size = 4096;
  r.offset = 8192;
  r.allocation_size = 1 << 21;
  for (size_t i = 0; i < r.ipc_handle.size(); ++i) r.ipc_handle[i] = static_cast<uint8_t>(i * 3);
  r.gpu = "0000:b7:00.0";
  return r;
}

Message RoundTrip(const Message& m) {
  const std::string packet = Encode(m);
  EXPECT_LE(packet.size(), kMaxMessageBytes);
  absl::StatusOr<Message> back = Decode(packet, FdsFor(m.body));
  EXPECT_TRUE(back.ok()) << back.status();
  if (!back.ok()) return Message{};
  EXPECT_EQ(back->request_id, m.request_id);
  EXPECT_EQ(TypeOf(back->body), TypeOf(m.body));
  EXPECT_EQ(Encode(*back), packet);  // every byte of the packet is in the struct
  return *back;
}

TEST(HandoffMessageTest, EveryTypeRoundTrips) {
  Message hello = RoundTrip({7, Hello{"trainer rank 3"}});
  EXPECT_EQ(std::get<Hello>(hello.body).name, "trainer rank 3");

  HelloOk ok{0x1122334455667788, {}, "gdragent 1.4.0"};
  for (size_t i = 0; i < ok.key.size(); ++i) ok.key[i] = static_cast<uint8_t>(0xA0 + i);
  Message ok_back = RoundTrip({7, ok});
  EXPECT_EQ(std::get<HelloOk>(ok_back.body).session, ok.session);
  EXPECT_EQ(std::get<HelloOk>(ok_back.body).key, ok.key);
  EXPECT_EQ(std::get<HelloOk>(ok_back.body).server, "gdragent 1.4.0");

  for (const Register& r :
       {HostRegion(), GpuRegion(MemoryKind::kGpuIpc), GpuRegion(MemoryKind::kGpuVmmFd),
        GpuRegion(MemoryKind::kGpuVmmChunks)}) {
    SCOPED_TRACE(MemoryKindName(r.kind));
    Message back = RoundTrip({0xFFFFFFFF, r});
    const auto& b = std::get<Register>(back.body);
    EXPECT_EQ(b.kind, r.kind);
    EXPECT_EQ(b.writable, r.writable);
    EXPECT_EQ(b.address, r.address);
    EXPECT_EQ(b.size, r.size);
    EXPECT_EQ(b.offset, r.offset);
    EXPECT_EQ(b.allocation_size, r.allocation_size);
    EXPECT_EQ(b.ipc_handle, r.ipc_handle);
    EXPECT_EQ(b.gpu, r.gpu);
  }
  EXPECT_EQ(std::get<Registered>(RoundTrip({3, Registered{0xDEADBEEF}}).body).rkey, 0xDEADBEEF);
  EXPECT_EQ(std::get<Deregister>(RoundTrip({4, Deregister{42}}).body).rkey, 42u);
  RoundTrip({5, Deregistered{}});
  RoundTrip({6, OpenChannel{}});
  RoundTrip({6, ChannelOpen{}});
  EXPECT_EQ(std::get<RegisterChunk>(RoundTrip({9, RegisterChunk{20 << 20}}).body).size,
            uint64_t{20} << 20);
  EXPECT_EQ(std::get<ChunkStaged>(RoundTrip({9, ChunkStaged{kMaxChunks}}).body).staged,
            kMaxChunks);
  Message err = RoundTrip({8, Error{7, "uid 65534 is not admitted"}});
  EXPECT_EQ(std::get<Error>(err.body).code, 7u);
  EXPECT_EQ(std::get<Error>(err.body).message, "uid 65534 is not admitted");
}

TEST(HandoffMessageTest, EncodeCutsStringsToTheirLimits) {
  Message m = RoundTrip({1, Hello{std::string(1000, 'n')}});
  EXPECT_EQ(std::get<Hello>(m.body).name.size(), kMaxNameBytes);
  Message e = RoundTrip({1, Error{13, std::string(5000, 'e')}});
  EXPECT_EQ(std::get<Error>(e.body).message.size(), kMaxErrorBytes);
}

TEST(HandoffMessageTest, FdsForNamesTheTypesThatCarryOne) {
  EXPECT_EQ(FdsFor(HostRegion()), 1u);
  EXPECT_EQ(FdsFor(GpuRegion(MemoryKind::kGpuVmmFd)), 1u);
  EXPECT_EQ(FdsFor(GpuRegion(MemoryKind::kGpuIpc)), 0u);
  EXPECT_EQ(FdsFor(GpuRegion(MemoryKind::kGpuVmmChunks)), 0u);  // staged before, one each
  EXPECT_EQ(FdsFor(RegisterChunk{1}), 1u);
  EXPECT_EQ(FdsFor(ChunkStaged{1}), 0u);
  EXPECT_EQ(FdsFor(OpenChannel{}), 0u);
  EXPECT_EQ(FdsFor(ChannelOpen{}), 1u);
  EXPECT_EQ(FdsFor(Hello{}), 0u);
  EXPECT_EQ(FdsFor(Deregister{1}), 0u);
}

void ExpectRefused(const std::string& packet, size_t fds, const std::string& what) {
  absl::StatusOr<Message> m = Decode(packet, fds);
  ASSERT_FALSE(m.ok()) << "accepted; wanted an error about " << what;
  EXPECT_TRUE(absl::IsInvalidArgument(m.status())) << m.status();
  EXPECT_THAT(std::string(m.status().message()), HasSubstr(what));
}

TEST(HandoffMessageTest, HeaderFieldsAreChecked) {
  const std::string hello = Encode({9, Hello{"x"}});
  ExpectRefused("", 0, "shorter than the 16-byte header");
  ExpectRefused(hello.substr(0, 15), 0, "shorter than the 16-byte header");
  ExpectRefused(std::string(kMaxMessageBytes + 1, 'x'), 0, "more than the protocol's 1024");
  std::string p = hello;
  Patch<uint32_t>(p, kMagicAt, 0x54524447);
  ExpectRefused(p, 0, "bad magic 0x54524447");
  p = hello;
  Patch<uint16_t>(p, kVersionAt, 2);
  ExpectRefused(p, 0, "version 2");
  for (uint16_t type : {0, 12, 0xFFFF}) {
    p = hello;
    Patch<uint16_t>(p, kTypeAt, type);
    ExpectRefused(p, 0, "unknown message type " + std::to_string(type));
  }
  p = hello;
  Patch<uint32_t>(p, kBodyLenAt, 1000);
  ExpectRefused(p, 0, "a length past the packet");
  ExpectRefused(hello + "zz", 0, "trailing bytes");
  ExpectRefused(hello.substr(0, hello.size() - 1), 0, "a length past the packet");
}

TEST(HandoffMessageTest, StringsAreChecked) {
  std::string p = Encode({1, Hello{"abc"}});
  Patch<uint16_t>(p, kBody, 129);
  Patch<uint32_t>(p, kBodyLenAt, static_cast<uint32_t>(p.size() - kBody));
  ExpectRefused(p, 0, "HELLO name is 129 bytes, more than its limit of 128");
  p = Encode({1, Hello{"abc"}});
  Patch<uint16_t>(p, kBody, 100);
  ExpectRefused(p, 0, "HELLO name runs past the end");
  // The body length agrees with the packet; the string's length points past it.
  p = Encode({1, Error{3, "short"}});
  Patch<uint16_t>(p, kBody + 4, 200);
  ExpectRefused(p, 0, "ERROR message runs past the end");
  Register r = GpuRegion(MemoryKind::kGpuIpc);
  r.gpu = std::string(32, 'g');
  p = Encode({1, r});
  Patch<uint16_t>(p, p.size() - 34, 33);
  p.push_back('g');
  Patch<uint32_t>(p, kBodyLenAt, static_cast<uint32_t>(p.size() - kBody));
  ExpectRefused(p, 0, "REGISTER gpu is 33 bytes");
}

TEST(HandoffMessageTest, RegisterFieldsAreChecked) {
  const std::string host = Encode({1, HostRegion()});
  std::string p = host;
  Patch<uint8_t>(p, kKindAt, 9);
  ExpectRefused(p, 1, "unknown memory kind 9");
  p = host;
  Patch<uint8_t>(p, kFlagsAt, 0x81);
  ExpectRefused(p, 1, "flags 0x81 has unknown bits");
  p = host;
  Patch<uint16_t>(p, kReservedAt, 1);
  ExpectRefused(p, 1, "reserved");

  Register r = HostRegion();
  r.size = 0;
  ExpectRefused(Encode({1, r}), 1, "0 bytes");
  r = HostRegion();
  r.address = UINT64_MAX - 10;
  ExpectRefused(Encode({1, r}), 1, "wraps around");
  r = HostRegion();
  r.offset = UINT64_MAX - 100;
  ExpectRefused(Encode({1, r}), 1, "overflows");
  r = HostRegion();
  r.allocation_size = 1 << 30;
  ExpectRefused(Encode({1, r}), 1, "names a GPU allocation");
  r = GpuRegion(MemoryKind::kGpuVmmFd);
  r.gpu.clear();
  ExpectRefused(Encode({1, r}), 1, "names no GPU");
  r = GpuRegion(MemoryKind::kGpuIpc);
  r.offset = r.allocation_size - 100;
  ExpectRefused(Encode({1, r}), 0, "past the allocation");
}

TEST(HandoffMessageTest, ZeroKeysSessionsAndCodesAreRefused) {
  ExpectRefused(Encode({1, Registered{0}}), 0, "REGISTERED names rkey 0");
  ExpectRefused(Encode({1, Deregister{0}}), 0, "DEREGISTER names rkey 0");
  ExpectRefused(Encode({1, HelloOk{0, {}, "s"}}), 0, "session 0");
  ExpectRefused(Encode({1, Error{0, "fine"}}), 0, "status code 0");
  ExpectRefused(Encode({1, Error{17, "?"}}), 0, "status code 17");
  ExpectRefused(Encode({1, RegisterChunk{0}}), 1, "REGISTER_CHUNK of 0 bytes");
  ExpectRefused(Encode({1, ChunkStaged{0}}), 0, "CHUNK_STAGED counts 0 chunks");
  ExpectRefused(Encode({1, ChunkStaged{kMaxChunks + 1}}), 0, "CHUNK_STAGED counts 4097");
}

TEST(HandoffMessageTest, DescriptorCountsAreChecked) {
  ExpectRefused(Encode({1, Hello{"h"}}), 1, "HELLO carries 1 descriptors; it takes 0");
  ExpectRefused(Encode({1, HostRegion()}), 0,
                "REGISTER of host-memfd memory carries 0 descriptors; it takes 1");
  ExpectRefused(Encode({1, GpuRegion(MemoryKind::kGpuVmmFd)}), 0, "gpu-vmm-fd memory carries 0");
  ExpectRefused(Encode({1, GpuRegion(MemoryKind::kGpuIpc)}), 1, "gpu-ipc memory carries 1");
  ExpectRefused(Encode({1, OpenChannel{}}), 1, "OPEN_CHANNEL carries 1 descriptors; it takes 0");
  ExpectRefused(Encode({1, ChannelOpen{}}), 0, "CHANNEL_OPEN carries 0");
  ExpectRefused(Encode({1, Deregister{5}}), 2, "DEREGISTER carries 2");
  ExpectRefused(Encode({1, RegisterChunk{4096}}), 0, "REGISTER_CHUNK carries 0");
  ExpectRefused(Encode({1, GpuRegion(MemoryKind::kGpuVmmChunks)}), 1,
                "gpu-vmm-chunks memory carries 1");
}

TEST(HandoffMessageTest, RequestIdOfNeedsOnlyASoundHeader) {
  std::string p = Encode({77, Deregister{5}});
  EXPECT_EQ(RequestIdOf(p), 77u);
  Patch<uint16_t>(p, kTypeAt, 99);  // an unknown type still names its request
  EXPECT_EQ(RequestIdOf(p), 77u);
  EXPECT_EQ(RequestIdOf(p.substr(0, 15)), std::nullopt);
  Patch<uint32_t>(p, kMagicAt, 0);
  EXPECT_EQ(RequestIdOf(p), std::nullopt);
}

TEST(HandoffMessageTest, Names) {
  EXPECT_STREQ(MemoryKindName(MemoryKind::kHostMemfd), "host-memfd");
  EXPECT_STREQ(MemoryKindName(MemoryKind::kGpuIpc), "gpu-ipc");
  EXPECT_STREQ(MemoryKindName(MemoryKind::kGpuVmmFd), "gpu-vmm-fd");
  EXPECT_STREQ(MemoryKindName(MemoryKind::kGpuVmmChunks), "gpu-vmm-chunks");
  EXPECT_STREQ(MessageTypeName(TypeOf(RegisterChunk{})), "REGISTER_CHUNK");
  EXPECT_STREQ(MessageTypeName(TypeOf(ChunkStaged{})), "CHUNK_STAGED");
  EXPECT_STREQ(MessageTypeName(MessageType::kOpenChannel), "OPEN_CHANNEL");
  EXPECT_STREQ(MessageTypeName(TypeOf(Error{})), "ERROR");
  EXPECT_STREQ(MessageTypeName(TypeOf(Hello{})), "HELLO");
}

}  // namespace
}  // namespace gdr::handoff
