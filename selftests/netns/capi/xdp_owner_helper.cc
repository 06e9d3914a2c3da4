// Helper of xdp_owner_test.sh (run inside a test namespace):
//   xdp_owner_helper who IF        prints who holds IF's XDP hook
//                                  (lib::xdp_holder's description, "nothing")
//   xdp_owner_helper stale IF,...  loads mrc_xdp, attaches it the way libmrc
//                                  did before BPF links (loader::MrcXdpAttachment,
//                                  libxdp / netlink) and exits without
//                                  detaching: a stale mrc_xdp
//   xdp_owner_helper hold IF,...   the same, then prints "holding" and waits
//                                  until killed: a live holder of that kind
//   xdp_owner_helper other IF,...  attaches a 2-instruction XDP_PASS program
//                                  named other_xdp through netlink and exits
//   xdp_owner_helper pinned DIR IF,...  attaches mrc_xdp with its maps pinned
//                                  in DIR and exits: mrcd's program kept
//                                  attached while mrcd is stopped
//   xdp_owner_helper open DIR IF,...  Context::open without mrcd (pin_dir
//                                  DIR); prints "opened" or the error (exit 1)
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/bpf.h>
#include <linux/if_link.h>
#include <net/if.h>

#include "lib/plane_xdp.hpp"
#include "loader/attach.hpp"
#include "loader/mrc_xdp.hpp"
#include "mrc/mrc.hpp"
#include "util/strings.hpp"

namespace {

std::vector<std::string> split(const std::string& s) { return mrc::util::split(s, ',', true); }

int usage() {
  std::fprintf(stderr,
               "usage: xdp_owner_helper who IF | stale IF,... | hold IF,... | other IF,... | "
               "pinned DIR IF,... | open DIR IF,...\n");
  return 2;
}

// A program that is not mrc_xdp: r0 = XDP_PASS; exit.
int other(const std::string& ifs) {
  bpf_insn insns[2] = {};
  insns[0].code = BPF_ALU64 | BPF_MOV | BPF_K;
  insns[0].imm = XDP_PASS;
  insns[1].code = BPF_JMP | BPF_EXIT;
  const int fd = bpf_prog_load(BPF_PROG_TYPE_XDP, "other_xdp", "GPL", insns, 2, nullptr);
  if (fd < 0) {
    std::fprintf(stderr, "loading other_xdp: %s\n", std::strerror(errno));
    return 1;
  }
  for (const auto& n : split(ifs)) {
    const int err = bpf_xdp_attach(int(if_nametoindex(n.c_str())), fd, XDP_FLAGS_DRV_MODE, nullptr);
    if (err) {
      std::fprintf(stderr, "attaching other_xdp to %s: %s\n", n.c_str(), std::strerror(-err));
      return 1;
    }
  }
  return 0;
}

int open_device(const std::string& pin_dir, const std::string& ifs) {
  mrc::DeviceOptions o;
  o.interfaces = split(ifs);
  o.use_mrcd = false;
  o.pin_dir = pin_dir;
  auto c = mrc::Context::open(o);
  if (!c) {
    std::printf("%s\n", c.error().message().c_str());
    return 1;
  }
  std::printf("opened\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return usage();
  const std::string cmd = argv[1];
  if (cmd == "other" && argc == 3) return other(argv[2]);
  if (cmd == "open" && argc == 4) return open_device(argv[2], argv[3]);
  if (cmd == "pinned" && argc == 4) {
    mrc::loader::LoadOptions lo;
    lo.pin_dir = argv[2];
    auto prog = mrc::loader::MrcXdp::open_and_load(lo);
    if (!prog) {
      std::fprintf(stderr, "loading mrc_xdp: %s\n", prog.error().message().c_str());
      return 1;
    }
    mrc::loader::AttachOptions ao;
    ao.keep = true;
    auto at = mrc::loader::attach_all(*prog, split(argv[3]), ao);
    if (!at) {
      std::fprintf(stderr, "%s\n", at.error().message().c_str());
      return 1;
    }
    return 0;
  }
  if (argc != 3) return usage();
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
  auto prog = mrc::loader::MrcXdp::open_and_load();
  if (!prog) {
    std::fprintf(stderr, "loading mrc_xdp: %s\n", prog.error().message().c_str());
    return 1;
  }
  mrc::loader::AttachOptions ao;
  ao.keep = true;
  auto at = mrc::loader::attach_all(*prog, split(argv[2]), ao);
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
