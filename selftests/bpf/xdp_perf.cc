// mrc_xdp_perf: ns/packet of mrc_xdp_rx through BPF_PROG_TEST_RUN (no
// assertions; run it by hand, as root):
//   build-xdp/selftests/bpf/mrc_xdp_perf [repeat]   (default 1000000)
//
// "repeat" mode is one BPF_PROG_TEST_RUN with repeat=N; the kernel runs the
// program N times on the same buffer and reports the mean. That is exact for
// the redirected data packet (only its metadata write stops once the headroom
// is used up), but a trimmed packet is rewritten into a NACK by the first run,
// so the NACK path is also measured in "single" mode: N runs with repeat=1,
// the mean of the kernel-reported durations, next to the same figure for an
// empty XDP program (the harness' own cost).
#include <bpf/bpf.h>
#include <net/if.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "bpf_test_env.hpp"
#include "loader/log.hpp"
#include "loader/mrc_xdp.hpp"
#include "xdp_rows.hpp"

using namespace mrc;
using namespace mrc::testing;

namespace {

int empty_prog() {
  struct bpf_insn insns[] = {
      {BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_0, 0, 0, XDP_PASS},
      {BPF_JMP | BPF_EXIT, 0, 0, 0, 0},
  };
  return bpf_prog_load(BPF_PROG_TYPE_XDP, "mrc_empty", "GPL", insns, 2, nullptr);
}

double single_mode(int fd, const Frame& f, uint32_t ifindex, uint32_t n, uint32_t want) {
  uint64_t total = 0;
  for (uint32_t i = 0; i < n; i++) {
    auto r = xdp_test_run(fd, f, ifindex, 0, 1);
    if (!r || r->action != want) {
      std::fprintf(stderr, "unexpected result in run %u\n", i);
      std::exit(1);
    }
    total += r->duration_ns;
  }
  return double(total) / n;
}

}  // namespace

int main(int argc, char** argv) {
  uint32_t repeat = argc > 1 ? uint32_t(std::strtoul(argv[1], nullptr, 0)) : 1000000;
  if (!bpf_skip_reason().empty()) {
    std::printf("SKIP: %s\n", bpf_skip_reason().c_str());
    return 77;
  }
  if (auto s = enter_private_namespaces(); !s) {
    std::printf("SKIP: %s\n", s.error().message().c_str());
    return 77;
  }
  auto prog = loader::MrcXdp::open_and_load();
  if (!prog) {
    std::fprintf(stderr, "%s\n", prog.error().message().c_str());
    return 1;
  }
  std::string a = "mrcp" + std::to_string(getpid() % 100000) + "a";
  std::string b = "mrcp" + std::to_string(getpid() % 100000) + "b";
  if (auto s = make_veth(a, b); !s) {
    std::fprintf(stderr, "%s\n", s.error().message().c_str());
    return 1;
  }
  uint32_t ifindex = if_nametoindex(a.c_str());
  XskSocket xsk;
  if (auto s = xsk.open(a, 0); !s) {
    std::fprintf(stderr, "%s\n", s.error().message().c_str());
    return 1;
  }
  auto& m = prog->maps();
  if (!m.set_port(ifindex, {1, 0}) || !m.set_qp(0x123, {0xabcdef, 0}) ||
      !m.set_xsk(1, 0, xsk.fd())) {
    std::fprintf(stderr, "map setup failed\n");
    return 1;
  }

  Frame data = build_frame(make_packet(MRC_OP_WRITE_MIDDLE, codec::IpVersion::kV4, 1024));
  codec::Packet tp = make_packet(MRC_OP_WRITE_MIDDLE, codec::IpVersion::kV4, 1024);
  tp.ip.dscp = MRC_DSCP_TRIMMED_DEFAULT;
  Frame trimmed = build_frame(tp);
  codec::Packet tp6 = make_packet(MRC_OP_WRITE_MIDDLE, codec::IpVersion::kV6, 0);
  tp6.bth.ts = true;
  Frame trimmed6 = header_only(tp6, MRC_DSCP_TRIMMED_DEFAULT);
  Frame probe = build_frame(make_packet(MRC_OP_EP_REQUEST, codec::IpVersion::kV4));
  Frame other = udp_frame(codec::IpVersion::kV4, 53, 64);

  auto rep = [&](const Frame& f, uint32_t want) {
    auto r = xdp_test_run(prog->prog_fd(), f, ifindex, 0, repeat);
    if (!r || r->action != want) {
      std::fprintf(stderr, "repeat run failed\n");
      std::exit(1);
    }
    return double(r->duration_ns);
  };
  std::printf("mrc_xdp_rx via BPF_PROG_TEST_RUN, repeat=%u\n", repeat);
  std::printf("  repeat mode (one syscall, kernel mean per run):\n");
  std::printf("    %-44s %8.1f ns/packet\n", "IPv4 WRITE_MIDDLE 1024 B -> XSK redirect",
              rep(data, XDP_REDIRECT));
  std::printf("    %-44s %8.1f ns/packet\n", "IPv4 UDP to another port -> XDP_PASS",
              rep(other, XDP_PASS));

  int efd = empty_prog();
  const uint32_t n = repeat;
  double base = single_mode(efd, data, ifindex, n, XDP_PASS);
  double d = single_mode(prog->prog_fd(), data, ifindex, n, XDP_REDIRECT);
  double t = single_mode(prog->prog_fd(), trimmed, ifindex, n, XDP_TX);
  double t6 = single_mode(prog->prog_fd(), trimmed6, ifindex, n, XDP_TX);
  double e = single_mode(prog->prog_fd(), probe, ifindex, n, XDP_TX);
  close(efd);
  std::printf("  single mode (%u syscalls of repeat=1, mean of kernel-reported durations):\n", n);
  std::printf("    %-44s %8.1f ns/packet\n", "empty XDP program (harness cost)", base);
  std::printf("    %-44s %8.1f ns/packet (%.1f net)\n", "IPv4 WRITE_MIDDLE 1024 B -> XSK redirect",
              d, d - base);
  std::printf("    %-44s %8.1f ns/packet (%.1f net)\n", "IPv4 trimmed (DSCP) 1024 B -> NACK XDP_TX",
              t, t - base);
  std::printf("    %-44s %8.1f ns/packet (%.1f net)\n", "IPv6 header-only +TSETH -> NACK XDP_TX",
              t6, t6 - base);
  std::printf("    %-44s %8.1f ns/packet (%.1f net)\n", "IPv4 EV probe -> ENDPOINT_RESPONSE XDP_TX",
              e, e - base);
  return 0;
}
