// The engine thread's scheduling options (DeviceOptions::engine_sched,
// $MRC_ENGINE_SCHED; Documentation/api.md, "Engine thread scheduling"): every
// mode name parses and prints back, a bad name is EINVAL with a sentence
// naming the modes, and Context::open refuses a bad environment value or an
// option out of range before it touches any interface (no root needed).
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdlib>
#include <string>

#include "mrc/mrc.hpp"

namespace {

using mrc::EngineSched;

TEST(EngineSched, NamesRoundTrip) {
  for (EngineSched s : {EngineSched::kDefault, EngineSched::kNormal, EngineSched::kNice,
                        EngineSched::kFifo, EngineSched::kDedicated}) {
    auto p = mrc::parse_engine_sched(mrc::to_string(s));
    ASSERT_TRUE(p.ok()) << mrc::to_string(s);
    EXPECT_EQ(*p, s);
  }
  EXPECT_STREQ(mrc::to_string(EngineSched::kNice), "nice");
  EXPECT_STREQ(mrc::to_string(EngineSched::kFifo), "fifo");
}

TEST(EngineSched, BadNamesAreEinvalWithASentence) {
  for (const char* bad : {"", "Nice", "rt", "fifo ", "deadline", "spread", "nice-10"}) {
    auto p = mrc::parse_engine_sched(bad);
    ASSERT_FALSE(p.ok()) << "'" << bad << "'";
    EXPECT_EQ(p.error().code, EINVAL);
    EXPECT_NE(p.error().context.find("'" + std::string(bad) + "'"), std::string::npos)
        << p.error().context;
    EXPECT_NE(p.error().context.find("normal, nice, fifo, dedicated"), std::string::npos)
        << p.error().context;
  }
}

// Sets an environment variable for one scope.
struct EnvVar {
  std::string name;
  EnvVar(const char* n, const char* v) : name(n) { setenv(n, v, 1); }
  ~EnvVar() { unsetenv(name.c_str()); }
};

mrc::DeviceOptions opts() {
  mrc::DeviceOptions o;
  o.interfaces = {"mrc-no-such-if0"};
  o.mode = mrc::DeviceMode::kExclusive;
  return o;
}

TEST(EngineSched, OpenRefusesABadEnvironmentValue) {
  EnvVar e("MRC_ENGINE_SCHED", "realtime");
  auto c = mrc::Context::open(opts());
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().code, EINVAL);
  EXPECT_NE(c.error().context.find("MRC_ENGINE_SCHED=realtime"), std::string::npos)
      << c.error().context;
}

TEST(EngineSched, TheOptionWinsOverTheEnvironment) {
  // An explicit mode does not read $MRC_ENGINE_SCHED: the open gets past the
  // scheduling checks and fails on the missing interface instead.
  EnvVar e("MRC_ENGINE_SCHED", "realtime");
  auto o = opts();
  o.engine_sched = EngineSched::kNormal;
  auto c = mrc::Context::open(o);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().context.find("MRC_ENGINE_SCHED"), std::string::npos) << c.error().context;
}

TEST(EngineSched, OpenRefusesOptionsOutOfRange) {
  unsetenv("MRC_ENGINE_SCHED");
  auto o = opts();
  o.engine_sched = EngineSched::kDedicated;  // without engine_cpu
  auto c = mrc::Context::open(o);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().code, EINVAL);
  EXPECT_NE(c.error().context.find("needs engine_cpu"), std::string::npos) << c.error().context;
  o = opts();
  o.engine_nice = 20;
  c = mrc::Context::open(o);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().code, EINVAL);
  EXPECT_NE(c.error().context.find("engine_nice 20"), std::string::npos) << c.error().context;
  o = opts();
  o.engine_sched = EngineSched::kFifo;
  o.engine_rt_priority = 0;
  c = mrc::Context::open(o);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().code, EINVAL);
  EXPECT_NE(c.error().context.find("engine_rt_priority 0"), std::string::npos) << c.error().context;
}

TEST(EngineSched, DedicatedFromTheEnvironmentNamesIt) {
  EnvVar e("MRC_ENGINE_SCHED", "dedicated");
  auto c = mrc::Context::open(opts());
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().code, EINVAL);
  EXPECT_NE(c.error().context.find("(MRC_ENGINE_SCHED) needs engine_cpu"), std::string::npos)
      << c.error().context;
}

// Wake-up coalescing (DeviceOptions::engine_coalesce_us,
// $MRC_ENGINE_COALESCE_US): more than 1000 us, or an environment value that
// is not a number, is EINVAL naming where it came from; a good value gets
// past the check (and fails on the missing interface).
TEST(EngineCoalesce, OpenRefusesBadValuesNamingTheirSource) {
  unsetenv("MRC_ENGINE_SCHED");
  auto o = opts();
  o.engine_coalesce_us = 1001;
  auto c = mrc::Context::open(o);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().code, EINVAL);
  EXPECT_NE(c.error().context.find("engine_coalesce_us 1001"), std::string::npos)
      << c.error().context;
  for (const char* bad : {"1001", "30us", "-5", "+5", " 5", "x", "99999999999999999999999"}) {
    EnvVar e("MRC_ENGINE_COALESCE_US", bad);
    c = mrc::Context::open(opts());
    ASSERT_FALSE(c.ok()) << bad;
    EXPECT_EQ(c.error().code, EINVAL) << bad;
    EXPECT_NE(c.error().context.find("MRC_ENGINE_COALESCE_US=" + std::string(bad)),
              std::string::npos)
        << c.error().context;
  }
  for (const char* good : {"0", "30", "1000"}) {
    EnvVar e("MRC_ENGINE_COALESCE_US", good);
    c = mrc::Context::open(opts());
    ASSERT_FALSE(c.ok());
    EXPECT_EQ(c.error().context.find("COALESCE"), std::string::npos) << c.error().context;
  }
  // The option wins: the environment is not read.
  EnvVar e("MRC_ENGINE_COALESCE_US", "x");
  o = opts();
  o.engine_coalesce_us = 20;
  c = mrc::Context::open(o);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().context.find("COALESCE"), std::string::npos) << c.error().context;
}

}  // namespace
