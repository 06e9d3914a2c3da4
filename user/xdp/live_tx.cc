#include "xdp/live_tx.hpp"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/if_link.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <optional>
#include <thread>
#include <utility>

#include "loader/mrc_tx.hpp"
#include "util/clock.hpp"
#include "util/mmap_area.hpp"
#include "util/unique_fd.hpp"
#include "xdp/attached_prog.hpp"
#include "xdp/iface.hpp"
#include "xdp/netns.hpp"

#ifndef SO_NETNS_COOKIE
#define SO_NETNS_COOKIE 71
#endif

namespace mrc::xdp {

namespace {

constexpr uint32_t kEthVlanOverhead = 14 + 4;  // Ethernet header + one VLAN tag
constexpr uint8_t kSlotFree = 0, kSlotReserved = 1, kSlotQueued = 2;

// Effective capabilities of the calling thread, named, for error messages.
std::string capability_summary() {
  __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  if (syscall(SYS_capget, &hdr, data) != 0) return "capabilities unknown";
  auto has = [&](int cap) { return (data[cap / 32].effective >> (cap % 32)) & 1u; };
  constexpr int kCapBpf = 39, kCapPerfmon = 38;
  std::string missing;
  auto want = [&](int cap, const char* name) {
    if (!has(cap)) missing += std::string(missing.empty() ? "" : ", ") + name;
  };
  want(CAP_NET_ADMIN, "CAP_NET_ADMIN");
  if (!has(CAP_SYS_ADMIN)) {
    want(kCapBpf, "CAP_BPF");
    want(kCapPerfmon, "CAP_PERFMON");
  }
  return missing.empty() ? "the process has CAP_NET_ADMIN and CAP_BPF/CAP_SYS_ADMIN"
                         : "the process lacks " + missing;
}

Result<ScopedNetns> enter_port_netns(const std::string& ns) {
  if (ns.empty()) return ScopedNetns();
  if (ns[0] != '/') return ScopedNetns::enter(ns);
  UniqueFd fd(::open(ns.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return make_error(errno, "opening network namespace " + ns);
  return ScopedNetns::enter_fd(fd.get(), ns);
}

// SO_NETNS_COOKIE of the calling thread's network namespace (Linux 5.14+).
Result<uint64_t> current_netns_cookie() {
  UniqueFd s(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!s) return make_error(errno, "socket for SO_NETNS_COOKIE");
  uint64_t cookie = 0;
  socklen_t len = sizeof(cookie);
  if (::getsockopt(s.get(), SOL_SOCKET, SO_NETNS_COOKIE, &cookie, &len) != 0)
    return make_error(errno, "getsockopt(SO_NETNS_COOKIE)");
  return cookie;
}

int live_run(int prog_fd, const uint8_t* data, uint32_t size, uint32_t repeat, uint32_t batch) {
  LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = data, .data_size_in = size,
              .repeat = static_cast<int>(repeat), .flags = BPF_F_TEST_XDP_LIVE_FRAMES,
              .batch_size = batch);
  const int err = bpf_prog_test_run_opts(prog_fd, &o);
  return err < 0 ? -err : err;
}

}  // namespace

Result<uint32_t> probe_live_frame_limit(int xdp_prog_fd) {
  static const std::array<uint8_t, MRC_TX_SLOT_SIZE> zero{};
  int err = live_run(xdp_prog_fd, zero.data(), MRC_TX_TEMPLATE_LEN, 1, 1);
  if (err == EINVAL)
    return make_error(err,
                      "BPF_PROG_TEST_RUN with BPF_F_TEST_XDP_LIVE_FRAMES (the kernel has no live "
                      "frames: Linux 5.18 or later is needed)");
  if (err) return make_error(err, "BPF_PROG_TEST_RUN with BPF_F_TEST_XDP_LIVE_FRAMES");
  uint32_t lo = MRC_TX_TEMPLATE_LEN, hi = MRC_TX_SLOT_SIZE + 1;  // lo works, hi does not
  while (hi - lo > 1) {
    const uint32_t mid = lo + (hi - lo) / 2;
    err = live_run(xdp_prog_fd, zero.data(), mid, 1, 1);
    if (err == 0)
      lo = mid;
    else if (err == EINVAL)
      hi = mid;
    else
      return make_error(
          err, "probing the live-frames size limit with " + std::to_string(mid) + " bytes");
  }
  return lo;
}

struct LiveTx::State {
  LiveTxConfig cfg;
  loader::MrcTx tx;  // destroyed last: the mappings and the keepalive go first
  int prog_fd = -1;
  std::vector<LiveTxPortInfo> ports;
  MmapArea slots_area, descs_area, ctl_area;
  uint8_t* slots = nullptr;
  mrc_tx_desc* descs = nullptr;
  mrc_tx_ctl* ctl = nullptr;
  uint32_t nslots = 0, mask = 0;
  std::vector<uint32_t> free;       // free slot stack
  std::vector<uint8_t> slot_state;  // kSlotFree / kSlotReserved / kSlotQueued
  uint32_t prod = 0, cons = 0;      // descriptors queued / taken (mirror of ctl)
  uint32_t kernel_max = 0;
  AttachedXdpProg keepalive;
  bool xmit = false;
  std::vector<std::string> notes;
  LiveTxCounters c;
  std::optional<Error> last_error;
  std::array<uint8_t, MRC_TX_TEMPLATE_LEN> tmpl{};

  ~State() {
    (void)keepalive.detach();  // before the program goes away
    slots_area.reset();
    descs_area.reset();
    ctl_area.reset();
  }

  uint32_t load_u32(const __u32& v) const {
    return std::atomic_ref<const __u32>(v).load(std::memory_order_acquire);
  }
  uint64_t load_u64(const __u64& v) const {
    return std::atomic_ref<const __u64>(v).load(std::memory_order_relaxed);
  }

  // Descriptors [from, to) were taken (or given up): count their outcome
  // and free their slots.
  void reclaim(uint32_t from, uint32_t to, bool lost) {
    for (uint32_t i = from; i != to; ++i) {
      const mrc_tx_desc& d = descs[i & mask];
      if (lost) {
        c.lost++;
      } else {
        const uint8_t st = d.status;
        c.status[st < 16 ? st : 15]++;
        if (st == MRC_TX_ST_REDIRECTED)
          c.redirected++;
        else
          c.prog_errors++;
      }
      if (d.slot < nslots && slot_state[d.slot] == kSlotQueued) {
        slot_state[d.slot] = kSlotFree;
        free.push_back(d.slot);
      }
    }
  }

  Status configure_port(uint16_t i) {
    LiveTxPortInfo& p = ports[i];
    auto ns = enter_port_netns(p.netns);
    if (!ns) return std::move(ns).error();
    auto info = query_interface(p.ifname);
    if (!info) return std::move(info).error();
    auto cookie = current_netns_cookie();
    if (!cookie) return std::move(cookie).error();
    p.ifindex = info->ifindex;
    p.mtu = info->mtu;
    p.netns_cookie = *cookie;
    p.max_frame = std::min(kernel_max, p.mtu + kEthVlanOverhead);
    p.max_frame = std::min<uint32_t>(p.max_frame, MRC_TX_SLOT_SIZE);
    const uint32_t key = i + 1u;
    const uint32_t ifindex = static_cast<uint32_t>(p.ifindex);
    // A DEVMAP resolves the ifindex in the namespace of the updating thread.
    if (bpf_map_update_elem(tx.map_fd("mrc_tx_devmap"), &key, &ifindex, 0) != 0)
      return make_error(errno, "adding " + p.ifname + " to mrc_tx_devmap");
    (void)ns->leave();
    mrc_tx_port v{};
    v.ifindex = ifindex;
    v.max_frame = p.max_frame;
    v.netns_cookie = p.netns_cookie;
    if (bpf_map_update_elem(tx.map_fd("mrc_tx_ports"), &key, &v, 0) != 0)
      return make_error(errno, "updating mrc_tx_ports for " + p.ifname);
    return ok_status();
  }
};

namespace {

// Opens and loads mrc_tx (user/loader); with_tracing = also the two tp_btf
// programs. A refusal for want of privileges says which ones are missing.
Result<loader::MrcTx> open_and_load(const LiveTxConfig& cfg, bool with_tracing) {
  auto tx = loader::MrcTx::open_and_load(cfg.slots, with_tracing);
  if (!tx && (tx.error().code == EPERM || tx.error().code == EACCES))
    return make_error(tx.error().code,
                      "loading mrc_tx (live-frames TX needs CAP_BPF and CAP_NET_ADMIN, or root; " +
                          capability_summary() + ")");
  return tx;
}

}  // namespace

Result<LiveTx> LiveTx::create(const LiveTxConfig& cfg) {
  if (cfg.ports.empty()) return make_error(EINVAL, "LiveTx: no ports");
  if (cfg.ports.size() >= MRC_TX_MAX_PORTS)
    return make_error(EINVAL, "LiveTx: at most " + std::to_string(MRC_TX_MAX_PORTS - 1) + " ports");
  if (cfg.slots < 64 || cfg.slots > 65536 || (cfg.slots & (cfg.slots - 1)))
    return make_error(EINVAL, "LiveTx: slots must be a power of two in [64, 65536]");
  if (cfg.batch < 1 || cfg.batch > 256)
    return make_error(EINVAL,
                      "LiveTx: batch must be in [1, 256] (the kernel's TEST_XDP_MAX_BATCH)");

  auto st = std::make_unique<State>();
  State& s = *st;
  s.cfg = cfg;
  s.nslots = cfg.slots;
  s.mask = cfg.slots - 1;

  // 1. The BPF object; without the tracing programs if they cannot load.
  auto tx = open_and_load(cfg, cfg.count_xmit);
  if (!tx && cfg.count_xmit) {
    const std::string why = tx.error().message();
    tx = open_and_load(cfg, false);
    if (tx)
      s.notes.push_back("driver feedback (xmit_sent/xmit_drops/redirect_err) not counted: " + why);
  }
  if (!tx) return std::move(tx).error();
  s.tx = std::move(*tx);
  s.prog_fd = s.tx.prog_fd();

  // 2. The shared memory: slots, descriptors, control block.
  auto a = s.tx.map_array("mrc_tx_slots");
  if (!a) return std::move(a).error();
  s.slots_area = std::move(*a);
  a = s.tx.map_array("mrc_tx_descs");
  if (!a) return std::move(a).error();
  s.descs_area = std::move(*a);
  a = s.tx.map_array("mrc_tx_ctl");
  if (!a) return std::move(a).error();
  s.ctl_area = std::move(*a);
  s.slots = static_cast<uint8_t*>(s.slots_area.get());
  s.descs = static_cast<mrc_tx_desc*>(s.descs_area.get());
  s.ctl = static_cast<mrc_tx_ctl*>(s.ctl_area.get());
  s.free.reserve(s.nslots);
  for (uint32_t i = s.nslots; i-- > 0;) s.free.push_back(i);  // slot 0 first
  s.slot_state.assign(s.nslots, kSlotFree);

  // 3. The kernel's live-frames size limit.
  auto lim = probe_live_frame_limit(s.tx.probe_prog_fd());
  if (!lim) return std::move(lim).error();
  s.kernel_max = *lim;

  // 4. Ports: devmap entries (resolved in each interface's namespace).
  s.ports.resize(cfg.ports.size());
  for (uint16_t i = 0; i < cfg.ports.size(); ++i) {
    s.ports[i].ifname = cfg.ports[i].ifname;
    s.ports[i].netns = cfg.ports[i].netns;
    if (auto r = s.configure_port(i); !r)
      return std::move(r).error().wrap("LiveTx port " + std::to_string(i) + " (" +
                                       cfg.ports[i].ifname + ")");
  }
  bpf_map_info info{};
  uint32_t info_len = sizeof(info);
  if (bpf_obj_get_info_by_fd(s.tx.map_fd("mrc_tx_devmap"), &info, &info_len) != 0)
    return make_error(errno, "reading the id of mrc_tx_devmap");
  s.ctl->devmap_id = info.id;

  // 5. Driver feedback from the xdp tracepoints.
  if (s.tx.tracing_loaded()) {
    auto at = s.tx.attach_tracing();
    s.xmit = static_cast<bool>(at);
    if (!s.xmit) s.notes.push_back("driver feedback not counted: " + at.error().message());
  }

  // 6. Keep mrc_tx in the XDP dispatcher (see LiveTxConfig::dispatcher_keepalive).
  if (cfg.dispatcher_keepalive) {
    std::optional<Error> err;
    AttachedXdpProg ka;
    std::thread th([&] {
      if (::unshare(CLONE_NEWNET) != 0) {
        err = make_error(errno, "unshare(CLONE_NEWNET)");
        return;
      }
      auto at = AttachedXdpProg::attach(1, s.prog_fd, XDP_FLAGS_SKB_MODE,
                                        "lo of a private namespace (dispatcher keepalive)");
      if (!at) {
        err = std::move(at).error();
        return;
      }
      ka = std::move(*at);
    });
    th.join();
    if (err)
      s.notes.push_back("dispatcher keepalive failed, every submit pays two synchronize_rcu(): " +
                        err->message());
    else
      s.keepalive = std::move(ka);
  }

  LiveTx out;
  out.s_ = std::move(st);
  return out;
}

LiveTx::LiveTx() = default;
LiveTx::LiveTx(LiveTx&&) noexcept = default;
LiveTx& LiveTx::operator=(LiveTx&&) noexcept = default;
LiveTx::~LiveTx() = default;

uint32_t LiveTx::reserve(uint16_t port, std::span<LiveTxFrame> out) {
  State& s = *s_;
  if (port >= s.ports.size()) {
    s.c.bad_port++;
    return 0;
  }
  const uint32_t want = static_cast<uint32_t>(out.size());
  const uint32_t n = std::min<uint32_t>(want, static_cast<uint32_t>(s.free.size()));
  if (n < want) s.c.ring_full++;
  const uint32_t room = s.ports[port].max_frame;
  for (uint32_t i = 0; i < n; ++i) {
    const uint32_t slot = s.free.back();
    s.free.pop_back();
    s.slot_state[slot] = kSlotReserved;
    out[i] = {s.slots + size_t{slot} * MRC_TX_SLOT_SIZE, 0, room, slot, port};
  }
  s.c.reserved += n;
  return n;
}

void LiveTx::commit(std::span<const LiveTxFrame> frames) {
  State& s = *s_;
  for (const LiveTxFrame& f : frames) {
    if (f.slot >= s.nslots || s.slot_state[f.slot] != kSlotReserved) {
      s.c.misuse++;
      continue;
    }
    if (f.len == 0 || f.len > f.room || f.port >= s.ports.size()) {
      if (f.len == 0)
        s.c.cancelled++;
      else if (f.port >= s.ports.size())
        s.c.bad_port++;
      else
        s.c.commit_oversize++;
      s.slot_state[f.slot] = kSlotFree;
      s.free.push_back(f.slot);
      continue;
    }
    mrc_tx_desc& d = s.descs[s.prod & s.mask];
    d.slot = f.slot;
    d.len = static_cast<__u16>(f.len);
    d.port = static_cast<__u8>(f.port + 1);
    d.status = MRC_TX_ST_QUEUED;
    s.slot_state[f.slot] = kSlotQueued;
    s.prod++;
    s.c.committed++;
    s.c.committed_bytes += f.len;
  }
  if (s.cfg.auto_submit && s.prod - s.cons >= s.cfg.auto_submit) {
    s.c.auto_submits++;
    auto r = submit();
    if (!r)
      s.last_error = std::move(r).error();
    else
      s.last_error.reset();
  }
}

void LiveTx::cancel(std::span<const LiveTxFrame> frames) {
  State& s = *s_;
  for (const LiveTxFrame& f : frames) {
    if (f.slot >= s.nslots || s.slot_state[f.slot] != kSlotReserved) {
      s.c.misuse++;
      continue;
    }
    s.slot_state[f.slot] = kSlotFree;
    s.free.push_back(f.slot);
    s.c.cancelled++;
  }
}

Result<uint32_t> LiveTx::submit() {
  State& s = *s_;
  if (s.prod == s.cons) return 0u;
  std::atomic_ref<__u32>(s.ctl->prod).store(s.prod, std::memory_order_release);
  const uint64_t t0 = mono_ns();
  uint32_t taken = 0, tries = 0;
  int err = 0;
  while (s.cons != s.prod) {
    const uint32_t want = s.prod - s.cons;
    err =
        live_run(s.prog_fd, s.tmpl.data(), MRC_TX_TEMPLATE_LEN, want, std::min(s.cfg.batch, want));
    s.c.submits++;
    const uint32_t now = s.load_u32(s.ctl->cons);
    uint32_t took = now - s.cons;
    if (took > want) took = want;  // never beyond what was queued
    s.reclaim(s.cons, s.cons + took, false);
    s.cons += took;
    taken += took;
    if (err) s.c.submit_errors++;
    if (s.cons == s.prod) break;
    if (err && err != EINTR && err != ENOMEM) break;
    if (++tries > s.cfg.max_retries) break;
    s.c.submit_retries++;
  }
  s.c.submit_frames += taken;
  s.c.submit_ns += mono_ns() - t0;
  if (s.cons == s.prod) return taken;
  // The kernel kept failing: drop what is left, counted, so the ring
  // cannot stay full forever.
  const uint32_t left = s.prod - s.cons;
  s.reclaim(s.cons, s.prod, true);
  s.cons = s.prod;
  std::atomic_ref<__u32>(s.ctl->cons).store(s.prod, std::memory_order_release);
  return make_error(err ? err : EIO, "BPF_PROG_TEST_RUN (live frames) sent " +
                                         std::to_string(taken) + " frames, " +
                                         std::to_string(left) + " dropped");
}

uint32_t LiveTx::pending() const { return s_->prod - s_->cons; }
uint32_t LiveTx::free_slots() const { return static_cast<uint32_t>(s_->free.size()); }
uint32_t LiveTx::slots() const { return s_->nslots; }
uint32_t LiveTx::max_frame() const { return s_->kernel_max; }
uint32_t LiveTx::max_frame(uint16_t port) const {
  return port < s_->ports.size() ? s_->ports[port].max_frame : 0;
}
uint16_t LiveTx::port_count() const { return static_cast<uint16_t>(s_->ports.size()); }
const LiveTxPortInfo& LiveTx::port(uint16_t port) const {
  static const LiveTxPortInfo none;  // no such port: empty, never an exception
  return port < s_->ports.size() ? s_->ports[port] : none;
}
bool LiveTx::xmit_counted() const { return s_->xmit; }
bool LiveTx::dispatcher_pinned() const { return static_cast<bool>(s_->keepalive); }
const std::vector<std::string>& LiveTx::notes() const { return s_->notes; }
const Error* LiveTx::last_error() const { return s_->last_error ? &*s_->last_error : nullptr; }
int LiveTx::prog_fd() const { return s_->prog_fd; }
int LiveTx::map_fd(const char* name) const { return s_->tx.map_fd(name); }

mrc_tx_port_fb LiveTx::feedback(uint16_t port) const {
  mrc_tx_port_fb fb{};
  if (port + 1u >= MRC_TX_MAX_PORTS) return fb;
  const mrc_tx_port_fb& p = s_->ctl->port[port + 1];
  fb.xmit_sent = s_->load_u64(p.xmit_sent);
  fb.xmit_drops = s_->load_u64(p.xmit_drops);
  fb.redirect_err = s_->load_u64(p.redirect_err);
  return fb;
}

const LiveTxCounters& LiveTx::counters() {
  State& s = *s_;
  s.c.xmit_sent = s.c.xmit_drops = s.c.redirect_err = 0;
  for (uint16_t p = 0; p < s.ports.size(); ++p) {
    const mrc_tx_port_fb fb = feedback(p);
    s.c.xmit_sent += fb.xmit_sent;
    s.c.xmit_drops += fb.xmit_drops;
    s.c.redirect_err += fb.redirect_err;
  }
  return s.c;
}

Result<mrc_tx_stats> LiveTx::stats(uint16_t port) const {
  const uint32_t key = port == kNoPort ? 0u : port + 1u;
  if (key >= MRC_TX_MAX_PORTS) return make_error(EINVAL, "LiveTx::stats: no such port");
  const int ncpu = libbpf_num_possible_cpus();
  if (ncpu <= 0) return errno_error(ncpu, "counting possible CPUs");
  std::vector<mrc_tx_stats> v(static_cast<size_t>(ncpu));
  if (bpf_map_lookup_elem(s_->tx.map_fd("mrc_tx_stats"), &key, v.data()) != 0)
    return make_error(errno, "reading mrc_tx_stats");
  mrc_tx_stats sum{};
  for (const mrc_tx_stats& x : v) {
    sum.tx_frames += x.tx_frames;
    sum.tx_bytes += x.tx_bytes;
    sum.xmit_sent += x.xmit_sent;
    sum.xmit_drops += x.xmit_drops;
    sum.redirect_err += x.redirect_err;
    sum.err_bad_port += x.err_bad_port;
    sum.err_no_dev += x.err_no_dev;
    sum.err_bad_len += x.err_bad_len;
    sum.err_oversize += x.err_oversize;
    sum.err_bad_slot += x.err_bad_slot;
    sum.err_resize += x.err_resize;
    sum.err_store += x.err_store;
    sum.err_empty += x.err_empty;
  }
  return sum;
}

Status LiveTx::refresh() {
  for (uint16_t i = 0; i < s_->ports.size(); ++i)
    if (auto r = s_->configure_port(i); !r)
      return std::move(r).error().wrap("LiveTx::refresh port " + std::to_string(i));
  return ok_status();
}

}  // namespace mrc::xdp
