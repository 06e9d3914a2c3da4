// Throughput of the simulated network (user/sim): end-to-end frames delivered
// per second of wall time, each crossing uplink, spine path and downlink.
//
//   build-sim/bench/sim_bench --benchmark_min_time=2
//
// items_per_second is simulated frames per second on one core.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "codec/packet.hpp"
#include "sim/network.hpp"
#include "support/packet_factory.hpp"

namespace {

using mrc::sim::kUs;
using mrc::sim::LinkSel;
using mrc::sim::NetConfig;
using mrc::sim::Network;
using mrc::sim::Time;

constexpr uint32_t kHosts = 8, kPlanes = 4, kPaths = 16;

struct Frame {
  uint32_t src, plane;
  std::vector<uint8_t> bytes;
};

// Pre-built frames between every pair of hosts on every plane, with spread
// source ports (entropy values), so the benchmark measures the simulator only.
std::vector<Frame> make_frames(const Network& net, uint8_t opcode, uint32_t payload, bool reverse) {
  std::vector<Frame> out;
  uint32_t k = 0;
  for (uint32_t src = 0; src < kHosts; src++)
    for (uint32_t dst = 0; dst < kHosts; dst++) {
      if (src == dst) continue;
      for (uint32_t plane = 0; plane < kPlanes; plane++)
        for (uint32_t ev = 0; ev < 4; ev++, k++) {
          const uint32_t s = reverse ? dst : src, d = reverse ? src : dst;
          auto p = mrc::testing::make_packet(opcode, mrc::codec::IpVersion::kV6,
                                             mrc::codec::is_data_opcode(opcode) ? payload : 0);
          p.eth.src = net.mac_of(s, plane);
          p.eth.dst = net.mac_of(d, plane);
          p.ip.src = net.ip_of(s, plane);
          p.ip.dst = net.ip_of(d, plane);
          p.udp.sport = uint16_t(0xc000 + k * 37);
          p.ip.flow_label = k & 0xffff;
          out.push_back({s, plane, mrc::testing::build_frame(p)});
        }
    }
  return out;
}

NetConfig bench_cfg() {
  NetConfig c;
  c.hosts = kHosts;
  c.planes = kPlanes;
  c.paths_per_plane = kPaths;
  c.ip_version = mrc::codec::IpVersion::kV6;
  return c;
}

// Every iteration each host sends a batch of data frames, then the network
// runs until the batch has arrived. args: payload bytes, faults on/off.
void BM_SimForward(benchmark::State& state) {
  const uint32_t payload = uint32_t(state.range(0));
  const bool faults = state.range(1) != 0;
  NetConfig c = bench_cfg();
  if (faults) {
    c.spine.loss = 0.01;
    c.spine.jitter = 200;
    c.spine.dup = 0.01;
    c.spine.reorder = 0.01;
    c.spine.reorder_delay = 5 * kUs;
    c.spine.ecn_threshold = 16 * 1024;
    c.spine.trim_threshold = 64 * 1024;
    c.downlink.trim_threshold = 64 * 1024;
    c.uplink.ecn_threshold = 32 * 1024;
  }
  Network net(c);
  uint64_t delivered = 0;
  for (uint32_t h = 0; h < kHosts; h++)
    net.attach(h, [&](int, std::span<const uint8_t> f, Time) {
      delivered++;
      benchmark::DoNotOptimize(f.data());
    });
  const auto frames = make_frames(net, MRC_OP_WRITE_MIDDLE, payload, false);
  size_t next = 0;
  const uint32_t batch = 256;
  for (auto _ : state) {
    for (uint32_t i = 0; i < batch; i++) {
      const Frame& f = frames[next];
      next = next + 1 == frames.size() ? 0 : next + 1;
      net.send(f.src, f.plane, f.bytes);
    }
    net.run_until_idle();
  }
  state.SetItemsProcessed(int64_t(delivered));
  state.counters["drops"] = double(net.net_counters().dropped());
  state.counters["sim_ms"] = double(net.now()) / 1e6;
}
BENCHMARK(BM_SimForward)
    ->ArgNames({"payload", "faults"})
    ->Args({64, 0})
    ->Args({1024, 0})
    ->Args({4096, 0})
    ->Args({4096, 1});

// Request/response as the engine drives it: every data frame is answered
// from the receive callback with a SACK-sized control frame. The traffic
// runs in a steady stream (one batch per microsecond of simulated time).
void BM_SimEcho(benchmark::State& state) {
  Network net(bench_cfg());
  const auto data = make_frames(net, MRC_OP_WRITE_MIDDLE, 4096, false);
  const auto acks = make_frames(net, MRC_OP_SACK, 0, true);
  // The control frames each host sends, in rotation.
  std::vector<std::vector<const Frame*>> by_src(kHosts);
  for (const Frame& a : acks) by_src[a.src].push_back(&a);
  std::vector<size_t> turn(kHosts, 0);
  uint64_t delivered = 0;
  for (uint32_t h = 0; h < kHosts; h++)
    net.attach(h, [&, h](int, std::span<const uint8_t> f, Time) {
      delivered++;
      if (f.size() < 1000) return;  // a control frame: nothing to answer
      const Frame& a = *by_src[h][turn[h]];
      turn[h] = (turn[h] + 1) % by_src[h].size();
      net.send(a.src, a.plane, a.bytes);
    });
  size_t next = 0;
  for (auto _ : state) {
    for (uint32_t i = 0; i < 64; i++) {
      const Frame& f = data[next];
      next = next + 1 == data.size() ? 0 : next + 1;
      net.send(f.src, f.plane, f.bytes);
    }
    net.run_for(1 * kUs);
  }
  net.run_until_idle();
  state.SetItemsProcessed(int64_t(delivered));
  state.counters["drops"] = double(net.net_counters().dropped());
}
BENCHMARK(BM_SimEcho);

}  // namespace

BENCHMARK_MAIN();
