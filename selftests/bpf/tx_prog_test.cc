// bpf/mrc_tx.bpf.c (live-frames TX) through BPF_PROG_TEST_RUN, and the
// LiveTx object of user/xdp on top of it. Runs in the private network and
// mount namespace of bpf_test_main.cc, with one veth pair there.
//
//  - TxRows: one descriptor per row, run without BPF_F_TEST_XDP_LIVE_FRAMES
//    (repeat 1, data_out) so the frame the program built comes back: action,
//    frame bytes, descriptor status, ring index and every counter.
//  - TxLive: the same program in live mode: the kernel's frame size limit,
//    more runs than descriptors, batches across the ring's wrap.
//  - LiveTxApi: reserve/commit/cancel/submit accounting, configuration
//    errors, and the message when capabilities are missing.
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <gtest/gtest.h>
#include <linux/capability.h>
#include <net/if.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstring>
#include <ostream>
#include <string>
#include <vector>

#include "bpf_test_env.hpp"
#include "mrc/uapi/tx.h"
#include "mrc_tx.skel.h"
#include "xdp/live_tx.hpp"

namespace mrc::testing {
namespace {

constexpr uint32_t kSlots = 64;
constexpr uint32_t kMaxFrame = 3000;  // max_frame of the test ports
constexpr const char* kIfA = "ltxa0";
constexpr const char* kIfB = "ltxb0";

#define ASSERT_OK(expr)                                                  \
  do {                                                                   \
    auto&& ok_r_ = (expr);                                               \
    ASSERT_TRUE(ok_r_.ok()) << #expr << ": " << ok_r_.error().message(); \
  } while (0)

// The veth pair every test sends to (created once, in the private namespace).
int test_ifindex() {
  static const int ifindex = [] {
    if (!make_veth(kIfA, kIfB)) return 0;
    return static_cast<int>(if_nametoindex(kIfA));
  }();
  return ifindex;
}

void* mmap_map(bpf_map* m) {
  const size_t elem = (bpf_map__value_size(m) + 7u) & ~size_t{7};
  const size_t len = (elem * bpf_map__max_entries(m) + 4095) / 4096 * 4096;
  void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, bpf_map__fd(m), 0);
  return p == MAP_FAILED ? nullptr : p;
}

// mrc_tx loaded on its own (no tracing programs), its rings mmapped.
// Port 1: the veth, max_frame kMaxFrame. Port 2: in mrc_tx_ports, but no
// devmap entry. Port 3: not configured (max_frame 0).
class TxObj : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_GT(test_ifindex(), 0) << "creating the veth pair";
    skel_ = mrc_tx__open();
    ASSERT_NE(skel_, nullptr);
    skel_->rodata->desc_mask = kSlots - 1;
    ASSERT_EQ(bpf_map__set_max_entries(skel_->maps.mrc_tx_slots, kSlots), 0);
    ASSERT_EQ(bpf_map__set_max_entries(skel_->maps.mrc_tx_descs, kSlots), 0);
    ASSERT_EQ(bpf_program__set_autoload(skel_->progs.mrc_tx_xmit, false), 0);
    ASSERT_EQ(bpf_program__set_autoload(skel_->progs.mrc_tx_redir_err, false), 0);
    ASSERT_EQ(mrc_tx__load(skel_), 0);
    slots_ = static_cast<uint8_t*>(mmap_map(skel_->maps.mrc_tx_slots));
    descs_ = static_cast<mrc_tx_desc*>(mmap_map(skel_->maps.mrc_tx_descs));
    ctl_ = static_cast<mrc_tx_ctl*>(mmap_map(skel_->maps.mrc_tx_ctl));
    ASSERT_TRUE(slots_ && descs_ && ctl_);
    const uint32_t ifindex = static_cast<uint32_t>(test_ifindex());
    const uint32_t one = 1;
    ASSERT_EQ(bpf_map_update_elem(bpf_map__fd(skel_->maps.mrc_tx_devmap), &one, &ifindex, 0), 0);
    set_port(1, kMaxFrame);
    set_port(2, kMaxFrame);
  }
  void TearDown() override {
    if (slots_) munmap(slots_, kSlots * MRC_TX_SLOT_SIZE);
    if (descs_) munmap(descs_, 4096);
    if (ctl_) munmap(ctl_, 4096);
    if (skel_) mrc_tx__destroy(skel_);
  }

  void set_port(uint32_t port, uint32_t max_frame) {
    mrc_tx_port p{static_cast<uint32_t>(test_ifindex()), max_frame, 0};
    ASSERT_EQ(bpf_map_update_elem(bpf_map__fd(skel_->maps.mrc_tx_ports), &port, &p, 0), 0);
  }
  // Fills slot with bytes that depend on (seed, offset).
  void fill(uint32_t slot, uint32_t seed) {
    uint8_t* p = slots_ + size_t{slot} * MRC_TX_SLOT_SIZE;
    for (uint32_t i = 0; i < MRC_TX_SLOT_SIZE; ++i)
      p[i] = static_cast<uint8_t>((seed * 131u + i * 7u + (i >> 8)) ^ 0x5a);
  }
  std::vector<uint8_t> slot_bytes(uint32_t slot, uint32_t len) const {
    const uint8_t* p = slots_ + size_t{slot} * MRC_TX_SLOT_SIZE;
    return {p, p + len};
  }
  // Queues one descriptor; returns its ring index.
  uint32_t queue(uint32_t slot, uint32_t len, uint32_t port) {
    const uint32_t i = prod_++;
    descs_[i & (kSlots - 1)] = {slot, static_cast<__u16>(len), static_cast<__u8>(port), 0xee};
    ctl_->prod = prod_;
    return i;
  }
  const mrc_tx_desc& desc(uint32_t i) const { return descs_[i & (kSlots - 1)]; }

  struct Run {
    uint32_t action = 0;
    std::vector<uint8_t> out;
  };
  // One run without live frames: the frame comes back in data_out.
  Result<Run> run_once() {
    std::array<uint8_t, MRC_TX_TEMPLATE_LEN> tmpl{};
    Run r;
    r.out.resize(MRC_TX_SLOT_SIZE);
    LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = tmpl.data(), .data_out = r.out.data(),
                .data_size_in = MRC_TX_TEMPLATE_LEN, .data_size_out = MRC_TX_SLOT_SIZE,
                .repeat = 1);
    if (bpf_prog_test_run_opts(bpf_program__fd(skel_->progs.mrc_tx), &o))
      return Error(errno, "BPF_PROG_TEST_RUN");
    r.action = o.retval;
    r.out.resize(o.data_size_out);
    return r;
  }
  // Live run of repeat frames in batches of batch.
  int run_live(uint32_t repeat, uint32_t batch) {
    std::array<uint8_t, MRC_TX_TEMPLATE_LEN> tmpl{};
    LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = tmpl.data(), .data_size_in = MRC_TX_TEMPLATE_LEN,
                .repeat = static_cast<int>(repeat), .flags = BPF_F_TEST_XDP_LIVE_FRAMES,
                .batch_size = batch);
    return bpf_prog_test_run_opts(bpf_program__fd(skel_->progs.mrc_tx), &o) ? errno : 0;
  }
  mrc_tx_stats stats(uint32_t key) const {
    const int ncpu = libbpf_num_possible_cpus();
    std::vector<mrc_tx_stats> v(static_cast<size_t>(ncpu));
    mrc_tx_stats sum{};
    if (bpf_map_lookup_elem(bpf_map__fd(skel_->maps.mrc_tx_stats), &key, v.data())) return sum;
    for (const auto& x : v) {
      const auto* a = reinterpret_cast<const uint64_t*>(&x);
      auto* s = reinterpret_cast<uint64_t*>(&sum);
      for (size_t i = 0; i < sizeof(sum) / 8; ++i) s[i] += a[i];
    }
    return sum;
  }

  mrc_tx* skel_ = nullptr;
  uint8_t* slots_ = nullptr;
  mrc_tx_desc* descs_ = nullptr;
  mrc_tx_ctl* ctl_ = nullptr;
  uint32_t prod_ = 0;
};

using Field = __u64 mrc_tx_stats::*;

struct Row {
  const char* name;
  uint32_t slot, len, port;
  uint32_t action;  // XDP_REDIRECT or XDP_DROP
  uint8_t status;
  uint32_t key;  // mrc_tx_stats key that counts it
  Field field;   // the counter that moves by one
};

void PrintTo(const Row& r, std::ostream* os) { *os << r.name; }

const Row kRows[] = {
    {"Min14", 3, 14, 1, XDP_REDIRECT, MRC_TX_ST_REDIRECTED, 1, &mrc_tx_stats::tx_frames},
    {"Small60", 4, 60, 1, XDP_REDIRECT, MRC_TX_ST_REDIRECTED, 1, &mrc_tx_stats::tx_frames},
    {"Template64", 5, 64, 1, XDP_REDIRECT, MRC_TX_ST_REDIRECTED, 1, &mrc_tx_stats::tx_frames},
    {"Odd1023", 6, 1023, 1, XDP_REDIRECT, MRC_TX_ST_REDIRECTED, 1, &mrc_tx_stats::tx_frames},
    {"Mtu1514", 7, 1514, 1, XDP_REDIRECT, MRC_TX_ST_REDIRECTED, 1, &mrc_tx_stats::tx_frames},
    {"PortMax", 63, kMaxFrame, 1, XDP_REDIRECT, MRC_TX_ST_REDIRECTED, 1, &mrc_tx_stats::tx_frames},
    {"PortMaxPlus1", 8, kMaxFrame + 1, 1, XDP_DROP, MRC_TX_ST_OVERSIZE, 1,
     &mrc_tx_stats::err_oversize},
    {"Len13", 9, 13, 1, XDP_DROP, MRC_TX_ST_BAD_LEN, 1, &mrc_tx_stats::err_bad_len},
    {"Len0", 9, 0, 1, XDP_DROP, MRC_TX_ST_BAD_LEN, 1, &mrc_tx_stats::err_bad_len},
    {"SlotBeyondRing", kSlots, 100, 1, XDP_DROP, MRC_TX_ST_BAD_SLOT, 1,
     &mrc_tx_stats::err_bad_slot},
    {"SlotHuge", 0xffffffffu, 100, 1, XDP_DROP, MRC_TX_ST_BAD_SLOT, 1, &mrc_tx_stats::err_bad_slot},
    {"Port0", 10, 100, 0, XDP_DROP, MRC_TX_ST_BAD_PORT, 0, &mrc_tx_stats::err_bad_port},
    {"PortNotConfigured", 10, 100, 3, XDP_DROP, MRC_TX_ST_BAD_PORT, 0, &mrc_tx_stats::err_bad_port},
    {"PortBeyondTable", 10, 100, MRC_TX_MAX_PORTS, XDP_DROP, MRC_TX_ST_BAD_PORT, 0,
     &mrc_tx_stats::err_bad_port},
    {"Port255", 10, 100, 255, XDP_DROP, MRC_TX_ST_BAD_PORT, 0, &mrc_tx_stats::err_bad_port},
    {"PortWithoutDevice", 11, 100, 2, XDP_DROP, MRC_TX_ST_NO_DEV, 2, &mrc_tx_stats::err_no_dev},
};

const Field kAllFields[] = {
    &mrc_tx_stats::tx_frames,   &mrc_tx_stats::err_bad_port, &mrc_tx_stats::err_no_dev,
    &mrc_tx_stats::err_bad_len, &mrc_tx_stats::err_oversize, &mrc_tx_stats::err_bad_slot,
    &mrc_tx_stats::err_resize,  &mrc_tx_stats::err_store,    &mrc_tx_stats::err_empty,
};

class TxRows : public TxObj, public ::testing::WithParamInterface<Row> {};

// One descriptor: the action, the frame (byte for byte), the status written
// back, the ring index moved by one, exactly one counter moved by one.
TEST_P(TxRows, Descriptor) {
  const Row& r = GetParam();
  if (r.slot < kSlots) fill(r.slot, r.len);
  const mrc_tx_stats before = stats(r.key);
  const mrc_tx_stats before_other = stats(r.key == 1 ? 0 : 1);
  const uint32_t i = queue(r.slot, r.len, r.port);
  auto run = run_once();
  ASSERT_OK(run);
  EXPECT_EQ(run->action, r.action);
  EXPECT_EQ(desc(i).status, r.status);
  EXPECT_EQ(ctl_->cons, i + 1);
  if (r.action == XDP_REDIRECT) {
    EXPECT_EQ(run->out.size(), r.len);
    EXPECT_TRUE(run->out == slot_bytes(r.slot, r.len)) << "frame differs from slot " << r.slot;
  }
  const mrc_tx_stats after = stats(r.key);
  const mrc_tx_stats after_other = stats(r.key == 1 ? 0 : 1);
  for (Field f : kAllFields) {
    EXPECT_EQ(after.*f - before.*f, f == r.field ? 1u : 0u) << "key " << r.key;
    EXPECT_EQ(after_other.*f, before_other.*f);
  }
  if (r.field == &mrc_tx_stats::tx_frames) {
    EXPECT_EQ(after.tx_bytes - before.tx_bytes, r.len);
  }
}

INSTANTIATE_TEST_SUITE_P(MrcTx, TxRows, ::testing::ValuesIn(kRows),
                         [](const ::testing::TestParamInfo<Row>& i) { return i.param.name; });

// Larger than the test run's frame can grow (non-live: 4096 - 256 - 320):
// bpf_xdp_adjust_tail refuses, the frame is dropped as RESIZE.
TEST_F(TxObj, GrowBeyondTheBufferIsResize) {
  set_port(1, MRC_TX_SLOT_SIZE);
  fill(1, 1);
  const uint32_t i = queue(1, MRC_TX_SLOT_SIZE, 1);
  auto run = run_once();
  ASSERT_OK(run);
  EXPECT_EQ(run->action, uint32_t{XDP_DROP});
  EXPECT_EQ(desc(i).status, MRC_TX_ST_RESIZE);
  EXPECT_EQ(stats(1).err_resize, 1u);
}

// No descriptor queued: dropped, counted as empty (key 0 and ctl.empty),
// the ring index does not move.
TEST_F(TxObj, EmptyRingIsCounted) {
  auto run = run_once();
  ASSERT_OK(run);
  EXPECT_EQ(run->action, uint32_t{XDP_DROP});
  EXPECT_EQ(ctl_->cons, 0u);
  EXPECT_EQ(ctl_->empty, 1u);
  EXPECT_EQ(stats(0).err_empty, 1u);
}

// Descriptors are taken in ring order across the wrap (3 x 64 entries), each
// frame carrying its own slot.
TEST_F(TxObj, RingOrderAcrossTheWrap) {
  for (uint32_t n = 0; n < 3 * kSlots + 5; ++n) {
    const uint32_t slot = (n * 17) % kSlots, len = 14 + (n * 97) % (kMaxFrame - 14);
    fill(slot, n);
    const uint32_t i = queue(slot, len, 1);
    auto run = run_once();
    ASSERT_OK(run);
    ASSERT_EQ(run->action, uint32_t{XDP_REDIRECT}) << "descriptor " << n;
    ASSERT_TRUE(run->out == slot_bytes(slot, len)) << "descriptor " << n;
    ASSERT_EQ(desc(i).status, MRC_TX_ST_REDIRECTED);
  }
  EXPECT_EQ(ctl_->cons, 3 * kSlots + 5);
  EXPECT_EQ(stats(1).tx_frames, 3 * kSlots + 5);
}

// ---- live mode ---------------------------------------------------------

// The largest frame live mode takes: 4096 - XDP_PACKET_HEADROOM (256) -
// sizeof(struct xdp_page_head) - SKB_DATA_ALIGN(sizeof(struct
// skb_shared_info)) (320) on x86-64. The page head is two struct xdp_buff
// (112 bytes) on 6.18, where the xdp_frame lives in the headroom; older
// kernels (Debian 12's 6.1) keep the 40-byte xdp_frame in the head as well:
// 3408 and 3368 bytes.
TEST_F(TxObj, LiveLimit) {
  auto lim = xdp::probe_live_frame_limit(bpf_program__fd(skel_->progs.mrc_tx_probe));
  ASSERT_OK(lim);
  std::printf("live frames limit: %u bytes\n", *lim);
#if defined(__x86_64__)
  if (sysconf(_SC_PAGESIZE) == 4096) {
    EXPECT_TRUE(*lim == 3408u || *lim == 3368u) << *lim;
  }
#endif
  EXPECT_GE(*lim, 3000u);
  EXPECT_LE(*lim, 4096u - 256u);
}

// In live mode a frame of exactly the limit is built and redirected; one
// byte more is refused by bpf_xdp_adjust_tail (RESIZE). The program checks
// max_frame first, so the port allows the whole slot here.
TEST_F(TxObj, LiveFrameAtTheLimitAndOneByteMore) {
  auto lim = xdp::probe_live_frame_limit(bpf_program__fd(skel_->progs.mrc_tx_probe));
  ASSERT_OK(lim);
  set_port(1, MRC_TX_SLOT_SIZE);
  fill(1, 1);
  fill(2, 2);
  const uint32_t a = queue(1, *lim, 1);
  const uint32_t b = queue(2, *lim + 1, 1);
  ASSERT_EQ(run_live(2, 2), 0);
  EXPECT_EQ(desc(a).status, MRC_TX_ST_REDIRECTED);
  EXPECT_EQ(desc(b).status, MRC_TX_ST_RESIZE);
  EXPECT_EQ(stats(1).tx_frames, 1u);
  EXPECT_EQ(stats(1).err_resize, 1u);
}

// More runs than descriptors: the extra runs find the ring empty.
TEST_F(TxObj, LiveMoreRunsThanDescriptors) {
  fill(0, 0);
  fill(1, 1);
  queue(0, 100, 1);
  queue(1, 200, 1);
  ASSERT_EQ(run_live(5, 64), 0);
  EXPECT_EQ(ctl_->cons, 2u);
  EXPECT_EQ(ctl_->empty, 3u);
  EXPECT_EQ(stats(0).err_empty, 3u);
  EXPECT_EQ(stats(1).tx_frames, 2u);
}

// Live batches of 7 over 3 x 60 descriptors: every descriptor taken, in
// order, across the ring's wrap; the counters add up.
TEST_F(TxObj, LiveBatchesAcrossTheWrap) {
  uint64_t bytes = 0;
  for (int round = 0; round < 3; ++round) {
    const uint32_t first = prod_;
    for (uint32_t n = 0; n < 60; ++n) {
      const uint32_t len = 60 + n * 41;
      queue(n, len, 1);
      bytes += len;
    }
    ASSERT_EQ(run_live(60, 7), 0);
    EXPECT_EQ(ctl_->cons, prod_);
    for (uint32_t i = first; i != prod_; ++i)
      ASSERT_EQ(desc(i).status, MRC_TX_ST_REDIRECTED) << "descriptor " << i;
  }
  EXPECT_EQ(stats(1).tx_frames, 180u);
  EXPECT_EQ(stats(1).tx_bytes, bytes);
  EXPECT_EQ(stats(0).err_empty, 0u);
}

// ---- LiveTx ------------------------------------------------------------

xdp::LiveTxConfig api_cfg(uint32_t slots = kSlots) {
  xdp::LiveTxConfig c;
  c.ports.push_back({kIfA, ""});
  c.slots = slots;
  return c;
}

// reserve / commit / cancel / submit keep every slot accounted for; misuse
// and oversize are counted and change nothing.
TEST(LiveTxApi, SlotAccounting) {
  ASSERT_GT(test_ifindex(), 0);
  auto tx = xdp::LiveTx::create(api_cfg());
  ASSERT_OK(tx);
  EXPECT_EQ(tx->slots(), kSlots);
  EXPECT_EQ(tx->max_frame(0), 1518u);  // MTU 1500 + 14 + 4
  std::vector<xdp::LiveTxFrame> f(kSlots + 1);
  EXPECT_EQ(tx->reserve(0, {f.data(), kSlots + 1}), kSlots);
  EXPECT_EQ(tx->counters().ring_full, 1u);
  EXPECT_EQ(tx->reserve(0, {f.data() + kSlots, 1}), 0u);
  EXPECT_EQ(tx->free_slots(), 0u);
  for (uint32_t i = 0; i < kSlots; ++i) {
    EXPECT_EQ(f[i].room, 1518u);
    std::memset(f[i].data, static_cast<int>(i), 100);
    f[i].len = 100;
  }
  tx->cancel({f.data(), 4});               // 4 back
  f[4].len = 0;                            // cancelled by commit
  f[5].len = 2000;                         // over room: dropped
  tx->commit({f.data() + 4, kSlots - 4});  // 58 queued
  tx->commit({f.data() + 10, 1});          // already queued: misuse
  tx->cancel({f.data() + 11, 1});          // already queued: misuse
  EXPECT_EQ(tx->pending(), kSlots - 6);
  EXPECT_EQ(tx->free_slots(), 6u);
  const auto& c = tx->counters();
  EXPECT_EQ(c.reserved, uint64_t{kSlots});
  EXPECT_EQ(c.cancelled, 5u);
  EXPECT_EQ(c.commit_oversize, 1u);
  EXPECT_EQ(c.misuse, 2u);
  EXPECT_EQ(c.committed, uint64_t{kSlots - 6});
  EXPECT_EQ(tx->reserve(7, {f.data(), 1}), 0u);  // no port 7
  EXPECT_EQ(tx->counters().bad_port, 1u);

  auto sent = tx->submit();
  ASSERT_OK(sent);
  EXPECT_EQ(*sent, kSlots - 6);
  EXPECT_EQ(tx->pending(), 0u);
  EXPECT_EQ(tx->free_slots(), kSlots);
  const auto& d = tx->counters();
  EXPECT_EQ(d.submits, 1u);
  EXPECT_EQ(d.redirected, uint64_t{kSlots - 6});
  EXPECT_EQ(d.status[MRC_TX_ST_REDIRECTED], uint64_t{kSlots - 6});
  EXPECT_EQ(d.prog_errors, 0u);
  auto st = tx->stats(0);
  ASSERT_OK(st);
  EXPECT_EQ(st->tx_frames, uint64_t{kSlots - 6});
  EXPECT_EQ(st->tx_bytes, uint64_t{kSlots - 6} * 100);
  // Nothing queued: submit is free.
  auto none = tx->submit();
  ASSERT_OK(none);
  EXPECT_EQ(*none, 0u);
  EXPECT_EQ(tx->counters().submits, 1u);
}

// auto_submit: commit() sends once that many frames are queued.
TEST(LiveTxApi, AutoSubmit) {
  ASSERT_GT(test_ifindex(), 0);
  auto cfg = api_cfg();
  cfg.auto_submit = 16;
  auto tx = xdp::LiveTx::create(cfg);
  ASSERT_OK(tx);
  xdp::LiveTxFrame f[40];
  ASSERT_EQ(tx->reserve(0, f), 40u);
  for (auto& x : f) x.len = 64;
  tx->commit({f, 15});
  EXPECT_EQ(tx->pending(), 15u);
  tx->commit({f + 15, 25});
  EXPECT_EQ(tx->pending(), 0u);
  EXPECT_EQ(tx->counters().auto_submits, 1u);
  EXPECT_EQ(tx->counters().submit_frames, 40u);
  EXPECT_EQ(tx->last_error(), nullptr);
}

// The dispatcher keepalive is in place (and the tracing programs attached)
// when the process has the capabilities.
TEST(LiveTxApi, KeepaliveAndTracing) {
  ASSERT_GT(test_ifindex(), 0);
  auto tx = xdp::LiveTx::create(api_cfg());
  ASSERT_OK(tx);
  for (const auto& n : tx->notes()) std::printf("note: %s\n", n.c_str());
  EXPECT_TRUE(tx->dispatcher_pinned());
  EXPECT_TRUE(tx->xmit_counted());
  auto cfg = api_cfg();
  cfg.dispatcher_keepalive = false;
  cfg.count_xmit = false;
  auto bare = xdp::LiveTx::create(cfg);
  ASSERT_OK(bare);
  EXPECT_FALSE(bare->dispatcher_pinned());
  EXPECT_FALSE(bare->xmit_counted());
}

// Configuration errors come back as values, with context.
TEST(LiveTxApi, ConfigurationErrors) {
  ASSERT_GT(test_ifindex(), 0);
  auto expect_err = [](xdp::LiveTxConfig c, int code, const std::string& words) {
    auto tx = xdp::LiveTx::create(c);
    ASSERT_FALSE(tx.ok());
    EXPECT_EQ(tx.error().code, code) << tx.error().message();
    EXPECT_NE(tx.error().message().find(words), std::string::npos) << tx.error().message();
  };
  xdp::LiveTxConfig none;
  expect_err(none, EINVAL, "no ports");
  expect_err(api_cfg(100), EINVAL, "power of two");
  auto big = api_cfg();
  big.batch = 300;
  expect_err(big, EINVAL, "batch");
  auto many = api_cfg();
  many.ports.assign(MRC_TX_MAX_PORTS, {kIfA, ""});
  expect_err(many, EINVAL, "at most");
  auto missing = api_cfg();
  missing.ports[0].ifname = "nosuchif0";
  auto r = xdp::LiveTx::create(missing);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("nosuchif0"), std::string::npos) << r.error().message();
  auto nons = api_cfg();
  nons.ports[0].netns = "mrc-no-such-netns";
  r = xdp::LiveTx::create(nons);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("mrc-no-such-netns"), std::string::npos)
      << r.error().message();
}

// Without CAP_BPF/CAP_NET_ADMIN/CAP_SYS_ADMIN (a child that dropped every
// capability), create() fails with EPERM and names what is missing.
TEST(LiveTxApi, MissingCapabilitiesAreNamed) {
  ASSERT_GT(test_ifindex(), 0);
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(fds[0]);
    __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct data[2] = {};
    std::string msg;
    if (syscall(SYS_capset, &hdr, data) != 0) {
      msg = "capset failed";
    } else {
      auto tx = xdp::LiveTx::create(api_cfg());
      msg = tx.ok() ? "created" : std::to_string(tx.error().code) + " " + tx.error().message();
    }
    (void)!write(fds[1], msg.data(), msg.size());
    _exit(0);
  }
  close(fds[1]);
  std::string msg;
  char buf[512];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof(buf))) > 0) msg.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_EQ(msg.rfind(std::to_string(EPERM) + " ", 0), 0u) << msg;
  EXPECT_NE(msg.find("CAP_BPF"), std::string::npos) << msg;
  EXPECT_NE(msg.find("CAP_NET_ADMIN"), std::string::npos) << msg;
}

}  // namespace
}  // namespace mrc::testing
