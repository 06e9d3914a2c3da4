// The test XDP program (xsk_test.bpf.c) as an RAII object: loads the
// skeleton, attaches xsk_redirect (or another program) to interfaces in the
// calling thread's namespace, and reads its counters.
#pragma once

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/if_link.h>
#include <net/if.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mrc/result.hpp"
#include "xdp/attached_prog.hpp"
#include "xsk_test.skel.h"

namespace mrc::xsktest {

inline constexpr uint16_t kTestEthertype = 0x88b5;

enum Counter : uint32_t { kSeen, kRedirect, kPass, kMetaErr, kDrop, kTx, kCounterMax };

struct TestCfg {
  uint32_t write_meta = 0;
  uint32_t match_all = 0;
};

class TestProg {
 public:
  static Result<std::unique_ptr<TestProg>> load() {
    auto p = std::unique_ptr<TestProg>(new TestProg());
    p->skel_ = xsk_test__open_and_load();
    if (!p->skel_) return make_error(errno ? errno : EINVAL, "loading xsk_test.bpf.o");
    return p;
  }
  ~TestProg() {
    attachments_.clear();  // detach before the programs close
    if (skel_) xsk_test__destroy(skel_);
  }
  TestProg(const TestProg&) = delete;
  TestProg& operator=(const TestProg&) = delete;

  int xsks_fd() const { return bpf_map__fd(skel_->maps.xsks); }
  int redirect_fd() const { return bpf_program__fd(skel_->progs.xsk_redirect); }
  int drop_fd() const { return bpf_program__fd(skel_->progs.xsk_drop); }
  int tx_fd() const { return bpf_program__fd(skel_->progs.xsk_tx); }

  // Attaches prog_fd (default xsk_redirect) in native mode to ifname (in the
  // calling thread's namespace), with XSKMAP keys starting at key_base.
  Status attach(const std::string& ifname, uint32_t key_base = 0, int prog_fd = -1) {
    const int ifindex = static_cast<int>(if_nametoindex(ifname.c_str()));
    if (ifindex == 0) return make_error(errno, "interface " + ifname);
    const uint32_t k = static_cast<uint32_t>(ifindex);
    if (bpf_map_update_elem(bpf_map__fd(skel_->maps.if_base), &k, &key_base, 0) != 0)
      return make_error(errno, "if_base update");
    auto a = xdp::AttachedXdpProg::attach(ifindex, prog_fd < 0 ? redirect_fd() : prog_fd,
                                          XDP_FLAGS_DRV_MODE, ifname);
    if (!a) return std::move(a).error();
    attachments_.push_back(std::move(*a));
    return ok_status();
  }
  void detach_all() { attachments_.clear(); }

  Status set_cfg(const TestCfg& c) {
    const uint32_t zero = 0;
    if (bpf_map_update_elem(bpf_map__fd(skel_->maps.cfg), &zero, &c, 0) != 0)
      return make_error(errno, "cfg update");
    return ok_status();
  }

  uint64_t counter(Counter which) const {
    const int ncpu = libbpf_num_possible_cpus();
    std::vector<uint64_t> v(static_cast<size_t>(ncpu > 0 ? ncpu : 1));
    const uint32_t k = which;
    if (bpf_map_lookup_elem(bpf_map__fd(skel_->maps.counters), &k, v.data()) != 0) return 0;
    uint64_t sum = 0;
    for (uint64_t x : v) sum += x;
    return sum;
  }

 private:
  TestProg() = default;
  xsk_test* skel_ = nullptr;
  std::vector<xdp::AttachedXdpProg> attachments_;
};

}  // namespace mrc::xsktest
