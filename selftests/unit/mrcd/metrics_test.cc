// SPDX-License-Identifier: (GPL-2.0 OR BSD-3-Clause)
// The Prometheus text builder (Expo, util/prom: mrcd's and mrc-serviced's): HELP/TYPE once per
// family, escaped HELP text and label values (text format 0.0.4).
#include <gtest/gtest.h>

#include "util/prom.hpp"

namespace mrc::testing {
namespace {

using mrc::prom::Expo;
using L = std::vector<std::pair<std::string, std::string>>;

TEST(MetricsExpo, FamilyAndSamples) {
  Expo e;
  e.family("mrc_x_seconds", "gauge", "a time");
  e.sample("mrc_x_seconds", L{{"port", "1"}}, 0.000125);
  e.sample("mrc_x_seconds", L{}, uint64_t(3));
  EXPECT_EQ(e.str(),
            "# HELP mrc_x_seconds a time\n# TYPE mrc_x_seconds gauge\n"
            "mrc_x_seconds{port=\"1\"} 0.000125\nmrc_x_seconds 3\n");
}

TEST(MetricsExpo, EscapesHelpAndLabelValues) {
  Expo e;
  e.family("mrc_y_total", "counter", "back\\slash\nnewline \"quotes\" stay");
  e.sample("mrc_y_total", L{{"comm", "a\"b\\c\nd"}, {"ifname", "eth1"}}, uint64_t(7));
  EXPECT_EQ(e.str(),
            "# HELP mrc_y_total back\\\\slash\\nnewline \"quotes\" stay\n"
            "# TYPE mrc_y_total counter\n"
            "mrc_y_total{comm=\"a\\\"b\\\\c\\nd\",ifname=\"eth1\"} 7\n");
}

}  // namespace
}  // namespace mrc::testing
