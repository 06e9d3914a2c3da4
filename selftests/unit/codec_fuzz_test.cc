// Seeded random-mutation fuzzing of the packet parser. Runs --runs=N inputs
// (default 1,000,000) derived from valid frames of every type: bit flips, byte
// overwrites, truncation, extension, length-field edits. Each input sits in an
// exactly sized heap buffer so ASan catches any read past it. The parser must
// never crash, and whatever it accepts must describe bytes inside the frame
// and build back to a frame that parses identically.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <random>
#include <string>

#include "codec/packet.hpp"
#include "support/packet_factory.hpp"

namespace mrc::codec {
namespace {

uint64_t g_runs = 1000000;
uint64_t g_seed = 0x6d7263;

TEST(CodecFuzz, RandomMutationsNeverCrashOrOverread) {
  std::mt19937_64 rng(g_seed);
  std::vector<std::vector<uint8_t>> seeds;
  for (IpVersion v : {IpVersion::kV4, IpVersion::kV6})
    for (uint8_t op : testing::kAllOpcodes)
      for (uint32_t n : {0u, 7u, 256u})
        if (is_data_opcode(op) || n == 0) {
          if (n % 4 && !opcode_info(op)->last) continue;
          seeds.push_back(testing::build_frame(testing::make_packet(op, v, n)));
        }
  CodecConfig cfg;
  uint64_t accepted = 0, by_error[size_t(ParseError::kCount)] = {};
  std::vector<uint8_t> work;
  for (uint64_t i = 0; i < g_runs; i++) {
    work = seeds[rng() % seeds.size()];
    int edits = 1 + int(rng() % 4);
    for (int e = 0; e < edits; e++) {
      // Every rng() call is its own statement so a seed replays identically
      // whatever the compiler's evaluation order.
      const uint64_t kind = rng() % 6, r1 = rng(), r2 = rng(), r3 = rng();
      switch (kind) {
        case 0:
          if (!work.empty()) work[r1 % work.size()] ^= uint8_t(1u << (r2 % 8));
          break;
        case 1:
          if (!work.empty()) work[r1 % work.size()] = uint8_t(r2);
          break;
        case 2:
          work.resize(r1 % (work.size() + 1));
          break;
        case 3:
          work.resize(work.size() + r1 % 16, uint8_t(r2));
          break;
        case 4:  // length fields: IPv4 total / IPv6 payload / UDP length
          if (work.size() > 60) {
            size_t at = (r1 & 1) ? 16 : (work[12] == 0x86 ? 18 : 38);
            work[at] = uint8_t(r2), work[at + 1] = uint8_t(r3);
          }
          break;
        case 5:
          if (work.size() > 50) work[42 + r1 % 8] = uint8_t(r2);
          break;
      }
    }
    auto buf = std::make_unique<uint8_t[]>(work.size() ? work.size() : 1);
    if (!work.empty()) std::memcpy(buf.get(), work.data(), work.size());
    Packet p;
    ParseError e = parse(std::span<const uint8_t>(buf.get(), work.size()), cfg, p);
    by_error[size_t(e)]++;
    if (e != ParseError::kOk) continue;
    accepted++;
    ASSERT_LE(p.frame_len, work.size());
    if (p.payload_len) {
      ASSERT_GE(p.payload, buf.get());
      ASSERT_LE(p.payload + p.payload_len, buf.get() + work.size());
    }
    if (p.trim == TrimKind::kNone) {
      // Accepted input is canonical: rebuilding gives a frame that parses the same.
      std::vector<uint8_t> again(frame_size(p) + 64);
      size_t n = build(p, again);
      ASSERT_GT(n, 0u) << "seed " << g_seed << " input " << i;
      again.resize(n);
      Packet q;
      ASSERT_EQ(parse(again, cfg, q), ParseError::kOk) << "seed " << g_seed << " input " << i;
      ASSERT_EQ(q.bth.psn, p.bth.psn);
      ASSERT_EQ(q.payload_len, p.payload_len);
    }
  }
  std::string summary;
  for (size_t k = 0; k < size_t(ParseError::kCount); k++)
    if (by_error[k])
      summary += std::string(to_string(ParseError(k))) + "=" + std::to_string(by_error[k]) + "; ";
  std::printf("fuzz: %llu inputs, %llu accepted; %s\n", (unsigned long long)g_runs,
              (unsigned long long)accepted, summary.c_str());
  // The mutations must reach the checks, not just the first one.
  EXPECT_GT(by_error[size_t(ParseError::kBadIcrc)], 0u);
  EXPECT_GT(by_error[size_t(ParseError::kTruncated)] + by_error[size_t(ParseError::kBadIpLength)],
            0u);
  EXPECT_GT(accepted, 0u);
}

}  // namespace
}  // namespace mrc::codec

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  for (int i = 1; i < argc; i++) {
    if (!std::strncmp(argv[i], "--runs=", 7))
      mrc::codec::g_runs = std::strtoull(argv[i] + 7, nullptr, 10);
    if (!std::strncmp(argv[i], "--seed=", 7))
      mrc::codec::g_seed = std::strtoull(argv[i] + 7, nullptr, 0);
  }
  return RUN_ALL_TESTS();
}
