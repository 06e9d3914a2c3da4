// EV expansion, validation, generation and carriage (mrc_ctl.h semantics).
#include <gtest/gtest.h>

#include <cerrno>
#include <string>
#include <vector>

#include "codec/ev.hpp"

namespace mrc::codec {
namespace {

std::string hex(const EvValue& v, size_t n) {
  static const char* d = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; i++) {
    s += d[v[i] >> 4];
    s += d[v[i] & 15];
  }
  return s;
}

// IPv6-style rendering of a 16-byte value, "::" for the trailing zero groups.
std::string v6(const EvValue& v) {
  std::vector<std::string> g;
  for (int i = 0; i < 8; i++) {
    char b[8];
    snprintf(b, sizeof b, "%04x", v[2 * i] << 8 | v[2 * i + 1]);
    g.push_back(b);
  }
  int last = 7;
  while (last >= 0 && g[size_t(last)] == "0000") last--;
  std::string s;
  for (int i = 0; i <= last; i++) s += (i ? ":" : "") + g[size_t(i)];
  if (last < 7) s += "::";
  return s;
}

struct Vector {
  const char* name;
  std::vector<EvFmtField> fmt;
  std::vector<EvField> fields;
  std::vector<uint8_t> compact;
  std::string want;
  bool srv6;
};

// The three vectors of the foundation issue plus the other three the OCP
// reference program (examples/ev_expansion) produces.
std::vector<Vector> vectors() {
  std::vector<EvFmtField> srv6_fmt = {{32}, {16}, {16}, {16}, {16}};
  return {
      {"stev_gen_fixed",
       {{16}, {16}},
       {{16, 0x0100, 0, 15, 0x000f}, {16, 0x0200, 0, 15, 0x000f}},
       {0xa4},
       "010a0204",
       false},
      {"stev_weird_mask",
       {{16}, {16}},
       {{16, 0x1000, 0, 255, 0x0f0f}, {16, 0x2000, 0, 255, 0x0f0f}},
       {0x33, 0x12},
       "13032102",
       false},
      {"stev_explicit",
       {{16}, {16}},
       {{16, 0, 0, 0xffff, 0xffff}, {16, 0, 0, 0xffff, 0xffff}},
       {0xf3, 0xb0, 0x42, 0x56},
       "f3b04256",
       false},
      {"srv6_gen",
       srv6_fmt,
       {{32, 0x42424242, 0, 0, 0},
        {4, 0, 0, 15, 0xf},
        {4, 0, 0, 15, 0xf},
        {4, 0, 0, 15, 0xf},
        {4, 0, 0, 15, 0xf}},
       {0x78, 0xba},
       "4242:4242:0007:0008:000b:000a::",
       true},
      {"srv6_gen_fixed_tier",
       srv6_fmt,
       {{32, 0x13131313, 0, 0, 0},
        {16, 1 << 8, 0, 15, 0x000f},
        {16, 2 << 8, 0, 15, 0x000f},
        {16, 3 << 8, 0, 15, 0x000f},
        {16, 4 << 8, 0, 15, 0x000f}},
       {0x9b, 0x79},
       "1313:1313:0109:020b:0307:0409::",
       true},
      {"srv6_explicit_subset",
       srv6_fmt,
       {{32, 0xdeaddead, 0, 0, 0}, {16, 0, 0, 0xffff, 0xffff}, {16, 0, 0, 0xffff, 0xffff}},
       {0xe2, 0x98, 0xf1, 0x15},
       "dead:dead:e298:f115::",
       true},
  };
}

// Conformance 9: EV expansion reproduces the reference vectors bit-exactly.
TEST(Ev, ExpansionVectorsBitExact) {
  for (const auto& v : vectors()) {
    SCOPED_TRACE(v.name);
    std::string why;
    ASSERT_EQ(ev_validate(v.fmt, v.fields, 256, &why), 0) << why;
    EvValue out;
    ASSERT_TRUE(ev_expand(v.fmt, v.fields, v.compact, out));
    EXPECT_EQ(v.srv6 ? v6(out) : hex(out, 4), v.want);
  }
}

TEST(Ev, ExpansionRejectsBitsBeyondProfile) {
  std::vector<EvFmtField> fmt = {{16}, {16}};
  std::vector<EvField> f = {{16, 0x0100, 0, 15, 0x000f}, {16, 0x0200, 0, 15, 0x000f}};
  EvValue out;
  EXPECT_TRUE(ev_expand(fmt, f, std::vector<uint8_t>{0xa4, 0x00}, out));
  EXPECT_FALSE(ev_expand(fmt, f, std::vector<uint8_t>{0xa4, 0x80}, out));
}

// Conformance 10: each of the five field rules (and the width limit) rejects.
TEST(Ev, ValidationRules) {
  std::vector<EvFmtField> fmt = {{16}, {16}};
  std::string why;
  auto check = [&](std::vector<EvField> f, std::vector<EvFmtField> ff, uint32_t maxw, int want) {
    int e = ev_validate(ff, f, maxw, &why);
    EXPECT_EQ(e, want) << why;
    if (want) {
      EXPECT_FALSE(why.empty());
    }
  };
  // 1. more fields than the format has
  check({{8, 0, 0, 0, 0}, {8, 0, 0, 0, 0}, {8, 0, 0, 0, 0}}, fmt, 32, EINVAL);
  // 2. total width beyond the format's (each field fits, the sum does not)
  check({{16, 0, 0, 0, 0}, {16, 0, 0, 0, 0}}, {{16}, {8}, {8}}, 32, EINVAL);
  // 3. init_val wider than the field
  check({{8, 0x100, 0, 0, 0}}, fmt, 32, EINVAL);
  // 4. mask outside the field width
  check({{8, 0, 0, 1, 0x100}}, fmt, 32, EINVAL);
  // 5. max_val wider than popcount(mask)
  check({{8, 0, 0, 16, 0x0f}}, fmt, 32, EINVAL);
  // device width limit
  check({{16, 0, 0, 0, 0}}, fmt, 16, E2BIG);
  // and a valid one
  check({{16, 0x0100, 0, 15, 0x000f}, {16, 0x0200, 0, 15, 0x000f}}, fmt, 32, 0);
}

TEST(Ev, GenerationEnumeratesRanges) {
  std::vector<EvFmtField> fmt = {{16}, {16}};
  std::vector<EvField> f = {{16, 0x0100, 1, 2, 0x000f}, {16, 0x0200, 0, 3, 0x000f}};
  EXPECT_EQ(ev_generate_space(f), 8u);
  std::vector<std::string> got;
  for (uint64_t i = 0; i < 9; i++) {
    EvValue c = ev_generate_compact(f, i), out;
    ASSERT_TRUE(ev_expand(fmt, f, c, out));
    got.push_back(hex(out, 4));
  }
  EXPECT_EQ(got[0], "01010200");
  EXPECT_EQ(got[1], "01010201");
  EXPECT_EQ(got[4], "01020200");
  EXPECT_EQ(got[7], "01020203");
  EXPECT_EQ(got[8], got[0]);  // wraps
}

TEST(Ev, CarriageInSportAndFlowLabel) {
  Ip ip;
  Udp udp;
  ip.src.ver = IpVersion::kV6;
  ev_apply(0x010a0204, EvFmtMode::kStev, ip, udp);
  EXPECT_EQ(udp.sport, 0x0204);
  EXPECT_EQ(ip.flow_label, 0x010au);
  EXPECT_EQ(ev_from_wire(ip, udp, EvFmtMode::kStev), 0x010a0204u);
  Ip ip4;
  Udp u4;
  ev_apply(0x010a0204, EvFmtMode::kStev, ip4, u4);
  EXPECT_EQ(ev_from_wire(ip4, u4, EvFmtMode::kStev), 0x0204u);  // high half not carried on IPv4
  EXPECT_EQ(ev_carried_mask(EvFmtMode::kStev, IpVersion::kV4), 0xffffu);
  EXPECT_EQ(ev_to_u32(ev_from_u32(0xc123, EvFmtMode::kUdp), EvFmtMode::kUdp), 0xc123u);
  EXPECT_EQ(ev_to_u32(ev_from_u32(0x12345678, EvFmtMode::kStev), EvFmtMode::kStev), 0x12345678u);
}

}  // namespace
}  // namespace mrc::codec
