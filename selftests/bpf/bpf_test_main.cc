// main() of the bpf-label tests: skips (exit 77) when the machine cannot run
// them, otherwise moves into private namespaces and runs the gtest tests. A
// run whose tests were all skipped also exits 77 so CTest reports a skip.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>

#include "bpf_test_env.hpp"
#include "loader/log.hpp"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (::testing::GTEST_FLAG(list_tests)) return RUN_ALL_TESTS();
  const std::string& why = mrc::testing::bpf_skip_reason();
  if (!why.empty()) {
    std::printf("SKIP: %s\n", why.c_str());
    return 77;
  }
  if (auto s = mrc::testing::enter_private_namespaces(); !s) {
    std::printf("SKIP: %s\n", s.error().message().c_str());
    return 77;
  }
  mrc::loader::set_log_hook(nullptr, mrc::loader::LogLevel::kWarn);
  int rc = RUN_ALL_TESTS();
  const auto* ut = ::testing::UnitTest::GetInstance();
  if (rc == 0 && ut->skipped_test_count() > 0 && ut->successful_test_count() == 0) return 77;
  return rc;
}
