// Helper of xdp_owner_test.sh (run inside a test namespace):
//   xdp_owner_helper who IF        prints who holds IF's XDP hook
//                                  (lib::xdp_holder's description, "nothing")
//   xdp_owner_helper stale IF,...  loads mrc_xdp, attaches it the way libmrc
//                                  did before BPF links (bpf::XdpAttachment,
//                                  libxdp / netlink) and exits without
//                                  detaching: a stale mrc_xdp
//   xdp_owner_helper hold IF,...   the same, then prints "holding" and waits
//                                  until killed: a live holder of that kind
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <net/if.h>

#include "bpf/attach.hpp"
#include "bpf/mrc_xdp.hpp"
#include "lib/plane_xdp.hpp"
#include "mrc/mrc.hpp"

namespace {

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  size_t b = 0;
  while (b <= s.size()) {
    size_t e = s.find(',', b);
    if (e == std::string::npos) e = s.size();
    if (e > b) out.push_back(s.substr(b, e - b));
    b = e + 1;
  }
  return out;
}

int usage() {
  std::fprintf(stderr, "usage: xdp_owner_helper who IF | stale IF,... | hold IF,...\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) return usage();
  const std::string cmd = argv[1];
  if (cmd == "who") {
    const int idx = int(if_nametoindex(argv[2]));
    if (!idx) {
      std::fprintf(stderr, "no interface %s\n", argv[2]);
      return 1;
    }
    auto h = mrc::lib::xdp_holder(idx, MRC_PIN_DIR_DEFAULT);
    if (!h) {
      std::fprintf(stderr, "%s\n", h.error().message().c_str());
      return 1;
    }
    std::printf("%s\n", h->describe().c_str());
    return 0;
  }
  if (cmd != "stale" && cmd != "hold") return usage();
  auto prog = mrc::bpf::MrcXdp::open_and_load();
  if (!prog) {
    std::fprintf(stderr, "loading mrc_xdp: %s\n", prog.error().message().c_str());
    return 1;
  }
  mrc::bpf::AttachOptions ao;
  ao.keep = true;
  auto at = mrc::bpf::attach_all(*prog, split(argv[2]), ao);
  if (!at) {
    std::fprintf(stderr, "%s\n", at.error().message().c_str());
    return 1;
  }
  for (const auto& a : *at) std::printf("%s\n", a.info().describe().c_str());
  if (cmd == "stale") return 0;  // the program stays attached, nobody holds it
  std::printf("holding\n");
  std::fflush(stdout);
  for (;;) pause();
}
