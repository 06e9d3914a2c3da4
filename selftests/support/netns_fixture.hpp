// Network namespaces joined by veth pairs for the AF_XDP tests and bench.
//
// A Topology makes two namespaces, "A" and "B", named uniquely per run
// (mrcx<pid>-<random>-a/-b), and veth pairs between them. It deletes them on
// destruction; a small reaper process (forked once, detached from the test's
// process tree) deletes whatever is left if the test process dies without
// running destructors (crash, SIGKILL from a ctest timeout).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "mrc/result.hpp"
#include "xdp/netns.hpp"

namespace mrc::xsktest {

// Runs argv (no shell); returns its stdout+stderr, or an error with them
// when it exits non-zero.
Result<std::string> run(const std::vector<std::string>& argv);

// Why the AF_XDP netns tests cannot run here, or "" if they can.
std::string skip_reason();
// skip_reason(), or why multi-buffer AF_XDP (XDP_USE_SG) cannot run here:
// it needs Linux 6.6 or later.
std::string multi_buffer_skip_reason();

struct VethSpec {
  std::string a_if;  // name in namespace A
  std::string b_if;  // name in namespace B
  uint32_t queues = 1;
  uint32_t mtu = 1500;
  std::array<uint8_t, 6> a_mac{};  // set by Topology: 02:00:00:00:<pair>:0a
  std::array<uint8_t, 6> b_mac{};  // 02:00:00:00:<pair>:0b
  std::string a_ip4, b_ip4;        // 198.18.<pair>.1/24, .2
  std::string a_ip6, b_ip6;        // fd00:<pair>::1/64, ::2
};

class Topology {
 public:
  // pairs veth pairs; pair i gets names <prefix>a<i>/<prefix>b<i>.
  static Result<Topology> create(uint32_t pairs, uint32_t queues = 1, uint32_t mtu = 1500);

  Topology() = default;
  Topology(Topology&& o) noexcept;
  Topology& operator=(Topology&& o) noexcept;
  Topology(const Topology&) = delete;
  Topology& operator=(const Topology&) = delete;
  ~Topology();

  const std::string& ns_a() const { return ns_[0]; }
  const std::string& ns_b() const { return ns_[1]; }
  const std::vector<VethSpec>& pairs() const { return pairs_; }
  Result<xdp::ScopedNetns> enter_a() const { return xdp::ScopedNetns::enter(ns_[0]); }
  Result<xdp::ScopedNetns> enter_b() const { return xdp::ScopedNetns::enter(ns_[1]); }
  // `ip -n <ns> args...`
  Result<std::string> ip(int side, const std::vector<std::string>& args) const;
  // `ip netns exec <ns> argv...`
  Result<std::string> exec(int side, const std::vector<std::string>& argv) const;
  // AF_XDP sockets open in a namespace (/proc/net/protocols there).
  Result<int> xdp_socket_count(int side) const;
  Status set_mtu(uint32_t mtu);

 private:
  void destroy();
  std::array<std::string, 2> ns_;
  std::vector<VethSpec> pairs_;
};

}  // namespace mrc::xsktest
