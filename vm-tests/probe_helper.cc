// mrc-vm-probe: the BPF / XDP / AF_XDP checks of vm-tests/probe.sh.
//
//   mrc-vm-probe [IFNAME PEER]
//
// Prints one line per feature, "name<TAB>yes|no|n/a<TAB>detail", and exits 0
// (1 only on bad usage). Without IFNAME/PEER only the checks that need no
// interface run. IFNAME and PEER are the two ends of a veth pair that the
// caller created in a network namespace of its own (probe.sh does); frames go
// only between them. Every program is a handful of raw instructions so the
// probe needs no compiler, object file or BTF to run.
#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/if_link.h>
#include <linux/if_packet.h>
#include <linux/if_xdp.h>
#include <linux/pkt_cls.h>
#include <net/if.h>
#include <netinet/ip.h>
#include <netinet/udp.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <xdp/xsk.h>

#include <array>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "mrc/uapi/maps.h"

namespace {

// ---- output ------------------------------------------------------------------

struct Outcome {
  const char* state;  // "yes", "no" or "n/a"
  std::string detail;
};
Outcome yes(std::string d = "") { return {"yes", std::move(d)}; }
Outcome no(std::string d) { return {"no", std::move(d)}; }
Outcome na(std::string d) { return {"n/a", std::move(d)}; }
std::string err(const char* what, int e) { return std::string(what) + ": " + std::strerror(e); }

void report(const char* name, const Outcome& o) {
  std::printf("%s\t%s\t%s\n", name, o.state, o.detail.c_str());
  std::fflush(stdout);
}

// ---- owners of the kernel handles ----------------------------------------------

class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }
  int get() const { return fd_; }
  bool ok() const { return fd_ >= 0; }
  void reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

// XDP program attached to an interface; detached on destruction.
class XdpAttachment {
 public:
  XdpAttachment() = default;
  XdpAttachment(int ifindex, uint32_t flags) : ifindex_(ifindex), flags_(flags) {}
  XdpAttachment(XdpAttachment&& o) noexcept
      : ifindex_(std::exchange(o.ifindex_, 0)), flags_(o.flags_) {}
  XdpAttachment& operator=(XdpAttachment&&) = delete;
  XdpAttachment(const XdpAttachment&) = delete;
  XdpAttachment& operator=(const XdpAttachment&) = delete;
  ~XdpAttachment() {
    if (ifindex_ > 0) bpf_xdp_detach(ifindex_, flags_, nullptr);
  }

 private:
  int ifindex_ = 0;
  uint32_t flags_ = 0;
};

// Anonymous memory (the UMEM).
class Mapping {
 public:
  explicit Mapping(size_t len)
      : len_(len),
        addr_(::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)) {}
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  ~Mapping() {
    if (ok()) ::munmap(addr_, len_);
  }
  bool ok() const { return addr_ != MAP_FAILED; }
  uint8_t* data() const { return static_cast<uint8_t*>(addr_); }
  size_t size() const { return len_; }

 private:
  size_t len_;
  void* addr_;
};

// A UMEM and one AF_XDP socket on queue 0, copy mode, no libxdp program.
class XskPair {
 public:
  static constexpr uint32_t kFrames = 64;
  static constexpr uint32_t kFrameSize = XSK_UMEM__DEFAULT_FRAME_SIZE;

  XskPair() : area_(size_t{kFrames} * kFrameSize) {}
  XskPair(const XskPair&) = delete;
  XskPair& operator=(const XskPair&) = delete;
  ~XskPair() {
    if (xsk_) xsk_socket__delete(xsk_);
    if (umem_) xsk_umem__delete(umem_);
  }

  // Returns 0 or a negative errno.
  int open(const char* ifname) {
    if (!area_.ok()) return -errno;
    xsk_umem_config ucfg{};
    ucfg.fill_size = kFrames;
    ucfg.comp_size = kFrames;
    ucfg.frame_size = kFrameSize;
    int r = xsk_umem__create(&umem_, area_.data(), area_.size(), &fill_, &comp_, &ucfg);
    if (r) {
      umem_ = nullptr;
      return r;
    }
    xsk_socket_config scfg{};
    scfg.rx_size = kFrames;
    scfg.tx_size = kFrames;
    scfg.libxdp_flags = XSK_LIBXDP_FLAGS__INHIBIT_PROG_LOAD;
    scfg.bind_flags = XDP_COPY;
    r = xsk_socket__create(&xsk_, ifname, 0, umem_, &rx_, &tx_, &scfg);
    if (r) {
      xsk_ = nullptr;
      return r;
    }
    // Lower half of the UMEM receives, upper half transmits.
    uint32_t idx = 0;
    if (xsk_ring_prod__reserve(&fill_, kFrames / 2, &idx) != kFrames / 2) return -ENOSPC;
    for (uint32_t i = 0; i < kFrames / 2; ++i)
      *xsk_ring_prod__fill_addr(&fill_, idx + i) = uint64_t{i} * kFrameSize;
    xsk_ring_prod__submit(&fill_, kFrames / 2);
    return 0;
  }

  int fd() const { return xsk_socket__fd(xsk_); }
  uint8_t* umem() const { return area_.data(); }
  xsk_ring_cons* rx() { return &rx_; }
  xsk_ring_prod* tx() { return &tx_; }
  xsk_ring_cons* comp() { return &comp_; }

 private:
  Mapping area_;
  xsk_umem* umem_ = nullptr;
  xsk_socket* xsk_ = nullptr;
  xsk_ring_prod fill_{};
  xsk_ring_cons comp_{};
  xsk_ring_cons rx_{};
  xsk_ring_prod tx_{};
};

// ---- BPF instructions ----------------------------------------------------------

bpf_insn insn(uint8_t code, uint8_t dst, uint8_t src, int16_t off, int32_t imm) {
  bpf_insn i{};
  i.code = code;
  i.dst_reg = dst & 0xf;
  i.src_reg = src & 0xf;
  i.off = off;
  i.imm = imm;
  return i;
}
bpf_insn mov_imm(uint8_t dst, int32_t imm) {
  return insn(BPF_ALU64 | BPF_MOV | BPF_K, dst, 0, 0, imm);
}
bpf_insn mov_reg(uint8_t dst, uint8_t src) {
  return insn(BPF_ALU64 | BPF_MOV | BPF_X, dst, src, 0, 0);
}
bpf_insn add_imm(uint8_t dst, int32_t imm) {
  return insn(BPF_ALU64 | BPF_ADD | BPF_K, dst, 0, 0, imm);
}
bpf_insn ldx_w(uint8_t dst, uint8_t src, int16_t off) {
  return insn(BPF_LDX | BPF_MEM | BPF_W, dst, src, off, 0);
}
bpf_insn st_w(uint8_t dst, int16_t off, int32_t imm) {
  return insn(BPF_ST | BPF_MEM | BPF_W, dst, 0, off, imm);
}
bpf_insn jne_imm(uint8_t dst, int32_t imm, int16_t off) {
  return insn(BPF_JMP | BPF_JNE | BPF_K, dst, 0, off, imm);
}
bpf_insn jgt_reg(uint8_t dst, uint8_t src, int16_t off) {
  return insn(BPF_JMP | BPF_JGT | BPF_X, dst, src, off, 0);
}
bpf_insn call(int32_t helper) { return insn(BPF_JMP | BPF_CALL, 0, 0, 0, helper); }
bpf_insn exit_insn() { return insn(BPF_JMP | BPF_EXIT, 0, 0, 0, 0); }
std::array<bpf_insn, 2> ld_map_fd(uint8_t dst, int fd) {
  return {insn(BPF_LD | BPF_DW | BPF_IMM, dst, BPF_PSEUDO_MAP_FD, 0, fd), insn(0, 0, 0, 0, 0)};
}

constexpr uint32_t kMetaLen = sizeof(mrc_xdp_meta);
static_assert(kMetaLen % 4 == 0, "XDP metadata must be a multiple of 4 bytes");

Fd load(bpf_prog_type type, const std::vector<bpf_insn>& insns, uint32_t prog_flags,
        std::string* why) {
  std::vector<char> log(64 * 1024);
  LIBBPF_OPTS(bpf_prog_load_opts, opts, .prog_flags = prog_flags, .log_level = 1,
              .log_size = static_cast<uint32_t>(log.size()), .log_buf = log.data());
  int fd = bpf_prog_load(type, "mrc_vm_probe", "GPL", insns.data(), insns.size(), &opts);
  if (fd < 0 && why) {
    *why = err("BPF_PROG_LOAD", errno);
    std::string v(log.data());
    if (!v.empty()) *why += " (verifier: " + v.substr(0, 200) + ")";
  }
  return Fd(fd);
}

// return VERDICT
std::vector<bpf_insn> verdict_prog(int verdict) {
  return {mov_imm(BPF_REG_0, verdict), exit_insn()};
}

// Reserves kMetaLen bytes of metadata, stores MRC_XDP_META_MAGIC at the
// offset of mrc_xdp_meta::magic, redirects to XSKMAP[rx_queue_index] (or
// passes when that slot is empty).
std::vector<bpf_insn> xsk_meta_prog(int xskmap_fd) {
  const auto m = ld_map_fd(BPF_REG_1, xskmap_fd);
  std::vector<bpf_insn> p = {
      mov_reg(BPF_REG_6, BPF_REG_1),
      mov_imm(BPF_REG_2, -static_cast<int32_t>(kMetaLen)),
      call(BPF_FUNC_xdp_adjust_meta),
      jne_imm(BPF_REG_0, 0, 12),  // -> pass
      ldx_w(BPF_REG_2, BPF_REG_6, offsetof(xdp_md, data_meta)),
      ldx_w(BPF_REG_3, BPF_REG_6, offsetof(xdp_md, data)),
      mov_reg(BPF_REG_4, BPF_REG_2),
      add_imm(BPF_REG_4, kMetaLen),
      jgt_reg(BPF_REG_4, BPF_REG_3, 7),  // -> pass
      st_w(BPF_REG_2, offsetof(mrc_xdp_meta, magic), static_cast<int32_t>(MRC_XDP_META_MAGIC)),
      m[0],
      m[1],
      ldx_w(BPF_REG_2, BPF_REG_6, offsetof(xdp_md, rx_queue_index)),
      mov_imm(BPF_REG_3, XDP_PASS),
      call(BPF_FUNC_redirect_map),
      exit_insn(),
      mov_imm(BPF_REG_0, XDP_PASS),  // pass:
      exit_insn(),
  };
  return p;
}

// ---- frames ----------------------------------------------------------------------

// An Ethernet/IPv4/UDP frame 198.18.0.1 -> 198.18.0.2, port 4791, with a
// payload pattern that names the direction.
std::vector<uint8_t> make_frame(const uint8_t dst_mac[6], const uint8_t src_mac[6], uint8_t tag) {
  constexpr size_t kPayload = 64;
  std::vector<uint8_t> f(sizeof(ethhdr) + sizeof(iphdr) + sizeof(udphdr) + kPayload);
  auto* eth = reinterpret_cast<ethhdr*>(f.data());
  std::memcpy(eth->h_dest, dst_mac, 6);
  std::memcpy(eth->h_source, src_mac, 6);
  eth->h_proto = htons(ETH_P_IP);
  iphdr ip{};
  ip.version = 4;
  ip.ihl = 5;
  ip.tot_len = htons(static_cast<uint16_t>(f.size() - sizeof(ethhdr)));
  ip.ttl = 1;
  ip.protocol = IPPROTO_UDP;
  ip.saddr = htonl(0xc6120001);  // 198.18.0.1
  ip.daddr = htonl(0xc6120002);  // 198.18.0.2
  uint32_t sum = 0;
  const auto* w = reinterpret_cast<const uint16_t*>(&ip);
  for (size_t i = 0; i < sizeof(ip) / 2; ++i) sum += w[i];
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  ip.check = static_cast<uint16_t>(~sum);
  std::memcpy(f.data() + sizeof(ethhdr), &ip, sizeof(ip));
  udphdr udp{};
  udp.source = htons(4791);
  udp.dest = htons(4791);
  udp.len = htons(static_cast<uint16_t>(sizeof(udphdr) + kPayload));
  std::memcpy(f.data() + sizeof(ethhdr) + sizeof(ip), &udp, sizeof(udp));
  for (size_t i = 0; i < kPayload; ++i)
    f[sizeof(ethhdr) + sizeof(ip) + sizeof(udp) + i] = static_cast<uint8_t>(tag + i);
  return f;
}

bool mac_of(const char* ifname, uint8_t mac[6]) {
  Fd s(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!s.ok()) return false;
  ifreq ifr{};
  std::snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", ifname);
  if (::ioctl(s.get(), SIOCGIFHWADDR, &ifr) < 0) return false;
  std::memcpy(mac, ifr.ifr_hwaddr.sa_data, 6);
  return true;
}

// AF_PACKET socket bound to one interface (protocol ETH_P_ALL to receive).
Fd packet_socket(int ifindex, uint16_t proto) {
  Fd s(::socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, htons(proto)));
  if (!s.ok()) return s;
  sockaddr_ll sll{};
  sll.sll_family = AF_PACKET;
  sll.sll_protocol = htons(proto);
  sll.sll_ifindex = ifindex;
  if (::bind(s.get(), reinterpret_cast<sockaddr*>(&sll), sizeof(sll)) < 0) return Fd();
  return s;
}

double now_s() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

// ---- checks without an interface ------------------------------------------------

Outcome check_bpf_syscall() {
  Fd m(bpf_map_create(BPF_MAP_TYPE_ARRAY, "mrc_probe", 4, 8, 1, nullptr));
  if (!m.ok()) return no(err("BPF_MAP_CREATE", errno));
  return yes("BPF_MAP_CREATE of an ARRAY map");
}

Outcome check_btf() {
  btf* b = btf__load_vmlinux_btf();
  if (!b) return no(err("btf__load_vmlinux_btf", errno));
  const unsigned n = btf__type_cnt(b);
  const bool has_xdp_md = btf__find_by_name_kind(b, "xdp_md", BTF_KIND_STRUCT) > 0;
  btf__free(b);
  return yes("vmlinux BTF, " + std::to_string(n) + " types" +
             (has_xdp_md ? ", struct xdp_md" : ""));
}

Outcome check_test_run() {
  std::string why;
  Fd p = load(BPF_PROG_TYPE_XDP, verdict_prog(XDP_TX), 0, &why);
  if (!p.ok()) return no(why);
  const uint8_t mac[6] = {0x02, 0, 0, 0, 0, 1};
  auto in = make_frame(mac, mac, 0x10);
  std::vector<uint8_t> out(in.size() + 256);
  LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = in.data(), .data_out = out.data(),
              .data_size_in = static_cast<uint32_t>(in.size()),
              .data_size_out = static_cast<uint32_t>(out.size()), .repeat = 1);
  if (bpf_prog_test_run_opts(p.get(), &o)) return no(err("BPF_PROG_TEST_RUN", errno));
  if (o.retval != XDP_TX) return no("retval " + std::to_string(o.retval) + ", expected XDP_TX");
  if (o.data_size_out != in.size() || std::memcmp(out.data(), in.data(), in.size()) != 0)
    return no("data_out differs from data_in");
  return yes("XDP program returned XDP_TX, frame unchanged");
}

Outcome check_test_run_meta() {
  // adjust_meta(-kMetaLen) then XDP_PASS; test_run must accept it.
  std::string why;
  std::vector<bpf_insn> p = {
      mov_imm(BPF_REG_2, -static_cast<int32_t>(kMetaLen)),
      call(BPF_FUNC_xdp_adjust_meta),
      jne_imm(BPF_REG_0, 0, 2),
      mov_imm(BPF_REG_0, XDP_PASS),
      exit_insn(),
      mov_imm(BPF_REG_0, XDP_ABORTED),
      exit_insn(),
  };
  Fd fd = load(BPF_PROG_TYPE_XDP, p, 0, &why);
  if (!fd.ok()) return no(why);
  const uint8_t mac[6] = {0x02, 0, 0, 0, 0, 1};
  auto in = make_frame(mac, mac, 0x20);
  LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = in.data(),
              .data_size_in = static_cast<uint32_t>(in.size()), .repeat = 1);
  if (bpf_prog_test_run_opts(fd.get(), &o)) return no(err("BPF_PROG_TEST_RUN", errno));
  if (o.retval != XDP_PASS)
    return no("bpf_xdp_adjust_meta(-" + std::to_string(kMetaLen) + ") failed in test_run");
  return yes(std::to_string(kMetaLen) + " bytes (sizeof mrc_xdp_meta) reserved in test_run");
}

Outcome check_live_frames() {
  std::string why;
  Fd p = load(BPF_PROG_TYPE_XDP, verdict_prog(XDP_DROP), 0, &why);
  if (!p.ok()) return no(why);
  const uint8_t mac[6] = {0x02, 0, 0, 0, 0, 1};
  auto in = make_frame(mac, mac, 0x30);
  LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = in.data(),
              .data_size_in = static_cast<uint32_t>(in.size()), .repeat = 4,
              .flags = BPF_F_TEST_XDP_LIVE_FRAMES);
  if (bpf_prog_test_run_opts(p.get(), &o))
    return no(err("BPF_PROG_TEST_RUN with BPF_F_TEST_XDP_LIVE_FRAMES", errno));
  return yes("BPF_F_TEST_XDP_LIVE_FRAMES (xdp-trafficgen)");
}

Outcome check_frags() {
  std::string why;
  Fd p = load(BPF_PROG_TYPE_XDP, verdict_prog(XDP_PASS), BPF_F_XDP_HAS_FRAGS, &why);
  if (!p.ok()) return no(why);
  return yes("BPF_F_XDP_HAS_FRAGS programs load");
}

Outcome check_helpers() {
  struct H {
    bpf_func_id id;
    const char* name;
  };
  const H hs[] = {
      {BPF_FUNC_xdp_adjust_meta, "xdp_adjust_meta"},
      {BPF_FUNC_xdp_adjust_head, "xdp_adjust_head"},
      {BPF_FUNC_xdp_adjust_tail, "xdp_adjust_tail"},
      {BPF_FUNC_redirect_map, "redirect_map"},
      {BPF_FUNC_ktime_get_ns, "ktime_get_ns"},
      {BPF_FUNC_csum_diff, "csum_diff"},
      {BPF_FUNC_fib_lookup, "fib_lookup"},
      {BPF_FUNC_loop, "loop"},
      {BPF_FUNC_xdp_load_bytes, "xdp_load_bytes"},
      {BPF_FUNC_xdp_get_buff_len, "xdp_get_buff_len"},
  };
  std::string have, missing;
  for (const H& h : hs) {
    const int r = libbpf_probe_bpf_helper(BPF_PROG_TYPE_XDP, h.id, nullptr);
    std::string& s = r == 1 ? have : missing;
    s += (s.empty() ? "" : " ") + std::string(h.name);
  }
  return missing.empty() ? yes("all of: " + have)
                         : no("missing: " + missing + (have.empty() ? "" : "; present: " + have));
}

Outcome check_map_types() {
  struct M {
    bpf_map_type t;
    const char* name;
  };
  const M ms[] = {
      {BPF_MAP_TYPE_XSKMAP, "xskmap"},
      {BPF_MAP_TYPE_HASH, "hash"},
      {BPF_MAP_TYPE_PERCPU_ARRAY, "percpu_array"},
      {BPF_MAP_TYPE_DEVMAP, "devmap"},
      {BPF_MAP_TYPE_DEVMAP_HASH, "devmap_hash"},
      {BPF_MAP_TYPE_RINGBUF, "ringbuf"},
      {BPF_MAP_TYPE_LRU_HASH, "lru_hash"},
  };
  std::string have, missing;
  for (const M& m : ms) {
    const int r = libbpf_probe_bpf_map_type(m.t, nullptr);
    std::string& s = r == 1 ? have : missing;
    s += (s.empty() ? "" : " ") + std::string(m.name);
  }
  return missing.empty() ? yes("all of: " + have)
                         : no("missing: " + missing + (have.empty() ? "" : "; present: " + have));
}

Outcome check_xsk_socket() {
  Fd s(::socket(AF_XDP, SOCK_RAW | SOCK_CLOEXEC, 0));
  if (!s.ok()) return no(err("socket(AF_XDP)", errno));
  return yes("socket(AF_XDP, SOCK_RAW)");
}

// ---- checks on the veth pair ------------------------------------------------------

Outcome check_xdp_native(const char* ifname) {
  const int ifindex = static_cast<int>(if_nametoindex(ifname));
  if (!ifindex) return na(err(ifname, errno));
  std::string why;
  Fd p = load(BPF_PROG_TYPE_XDP, verdict_prog(XDP_PASS), 0, &why);
  if (!p.ok()) return no(why);
  if (bpf_xdp_attach(ifindex, p.get(), XDP_FLAGS_DRV_MODE, nullptr))
    return no(err("attach in driver mode", errno));
  XdpAttachment a(ifindex, XDP_FLAGS_DRV_MODE);
  LIBBPF_OPTS(bpf_xdp_query_opts, q);
  if (bpf_xdp_query(ifindex, 0, &q)) return no(err("bpf_xdp_query", errno));
  if (q.attach_mode != XDP_ATTACHED_DRV) return no("attached, but not in driver mode");
  return yes("XDP_FLAGS_DRV_MODE on veth");
}

Outcome check_tc_bpf(const char* ifname) {
  const int ifindex = static_cast<int>(if_nametoindex(ifname));
  if (!ifindex) return na(err(ifname, errno));
  std::string why;
  Fd p = load(BPF_PROG_TYPE_SCHED_CLS, verdict_prog(TC_ACT_OK), 0, &why);
  if (!p.ok()) return no(why);
  LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = ifindex, .attach_point = BPF_TC_INGRESS);
  int r = bpf_tc_hook_create(&hook);
  if (r && r != -EEXIST) return no(err("clsact qdisc", -r));
  LIBBPF_OPTS(bpf_tc_opts, opts, .prog_fd = p.get());
  r = bpf_tc_attach(&hook, &opts);
  Outcome o =
      r ? no(err("cls_bpf attach (direct action)", -r)) : yes("clsact + cls_bpf direct-action");
  hook.attach_point = static_cast<bpf_tc_attach_point>(BPF_TC_INGRESS | BPF_TC_EGRESS);
  bpf_tc_hook_destroy(&hook);
  return o;
}

// Receives over AF_XDP what PEER sends to IFNAME (with metadata), and sends
// over AF_XDP from IFNAME to PEER. Fills both outcomes.
void check_xsk_traffic(const char* ifname, const char* peer, Outcome* bind_o, Outcome* rx_o,
                       Outcome* tx_o) {
  *bind_o = *rx_o = *tx_o = na("not reached");
  const int ifindex = static_cast<int>(if_nametoindex(ifname));
  const int peer_index = static_cast<int>(if_nametoindex(peer));
  uint8_t mac[6], peer_mac[6];
  if (!ifindex || !peer_index || !mac_of(ifname, mac) || !mac_of(peer, peer_mac)) {
    *bind_o = na(err("veth pair", errno));
    return;
  }
  XskPair x;
  if (int r = x.open(ifname)) {
    *bind_o = no(err("xsk_socket__create (copy mode, queue 0)", -r));
    return;
  }
  *bind_o = yes("bound to veth queue 0 in copy mode");

  // RX: XSKMAP + redirect program in driver mode.
  Fd map(bpf_map_create(BPF_MAP_TYPE_XSKMAP, "mrc_probe_xsks", 4, 4, 1, nullptr));
  if (!map.ok()) {
    *rx_o = no(err("XSKMAP", errno));
  } else {
    std::string why;
    Fd p = load(BPF_PROG_TYPE_XDP, xsk_meta_prog(map.get()), 0, &why);
    const uint32_t key = 0;
    const int xfd = x.fd();
    if (!p.ok()) {
      *rx_o = no(why);
    } else if (bpf_map_update_elem(map.get(), &key, &xfd, 0)) {
      *rx_o = no(err("XSKMAP update", errno));
    } else if (bpf_xdp_attach(ifindex, p.get(), XDP_FLAGS_DRV_MODE, nullptr)) {
      *rx_o = no(err("attach redirect program", errno));
    } else {
      XdpAttachment a(ifindex, XDP_FLAGS_DRV_MODE);
      Fd tx(packet_socket(peer_index, 0));
      const auto frame = make_frame(mac, peer_mac, 0x40);
      *rx_o = no("frame sent from the peer never reached the AF_XDP socket");
      // Up to 5 sends, 1 s each; other frames on the ring are skipped.
      for (int attempt = 0; attempt < 5 && std::strcmp(rx_o->state, "yes") != 0; ++attempt) {
        if (!tx.ok() || ::send(tx.get(), frame.data(), frame.size(), 0) < 0) {
          *rx_o = no(err("AF_PACKET send from the peer", errno));
          break;
        }
        const double deadline = now_s() + 1.0;
        while (now_s() < deadline) {
          pollfd pfd{xfd, POLLIN, 0};
          if (::poll(&pfd, 1, 100) <= 0) continue;
          uint32_t idx = 0;
          const uint32_t n = xsk_ring_cons__peek(x.rx(), XskPair::kFrames, &idx);
          bool found = false;
          for (uint32_t i = 0; i < n; ++i) {
            const xdp_desc* d = xsk_ring_cons__rx_desc(x.rx(), idx + i);
            const uint8_t* data = static_cast<uint8_t*>(xsk_umem__get_data(x.umem(), d->addr));
            if (d->len != frame.size() || std::memcmp(data, frame.data(), frame.size()) != 0)
              continue;
            mrc_xdp_meta meta{};
            std::memcpy(&meta, data - kMetaLen, kMetaLen);
            *rx_o = meta.magic == MRC_XDP_META_MAGIC
                        ? yes("frame received byte for byte, " + std::to_string(kMetaLen) +
                              "-byte metadata intact")
                        : no("frame received, but the metadata did not survive the copy");
            found = true;
          }
          xsk_ring_cons__release(x.rx(), n);
          if (found) break;
        }
      }
    }
  }

  // TX: a frame through the TX ring, seen on the peer.
  Fd rx(packet_socket(peer_index, ETH_P_ALL));
  if (!rx.ok()) {
    *tx_o = na(err("AF_PACKET receive socket on the peer", errno));
    return;
  }
  const auto frame = make_frame(peer_mac, mac, 0x50);
  const uint64_t addr = uint64_t{XskPair::kFrames / 2} * XskPair::kFrameSize;
  std::memcpy(x.umem() + addr, frame.data(), frame.size());
  uint32_t idx = 0;
  if (xsk_ring_prod__reserve(x.tx(), 1, &idx) != 1) {
    *tx_o = no("TX ring full");
    return;
  }
  xdp_desc* d = xsk_ring_prod__tx_desc(x.tx(), idx);
  d->addr = addr;
  d->len = static_cast<uint32_t>(frame.size());
  d->options = 0;
  xsk_ring_prod__submit(x.tx(), 1);
  if (::sendto(x.fd(), nullptr, 0, MSG_DONTWAIT, nullptr, 0) < 0 && errno != EAGAIN &&
      errno != EBUSY && errno != ENOBUFS) {
    *tx_o = no(err("sendto (TX kick)", errno));
    return;
  }
  *tx_o = no("frame sent over AF_XDP never reached the peer");
  std::vector<uint8_t> buf(2048);
  const double deadline = now_s() + 2.0;
  while (now_s() < deadline) {
    pollfd pfd{rx.get(), POLLIN, 0};
    if (::poll(&pfd, 1, 100) <= 0) continue;
    const ssize_t n = ::recv(rx.get(), buf.data(), buf.size(), MSG_DONTWAIT);
    if (n == static_cast<ssize_t>(frame.size()) &&
        std::memcmp(buf.data(), frame.data(), frame.size()) == 0) {
      uint32_t cidx = 0;
      const bool completed = xsk_ring_cons__peek(x.comp(), 1, &cidx) == 1;
      if (completed) xsk_ring_cons__release(x.comp(), 1);
      *tx_o = yes(std::string("frame received byte for byte on the peer") +
                  (completed ? ", completion seen" : ", no completion yet"));
      break;
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 1 && argc != 3) {
    std::fprintf(stderr, "usage: %s [IFNAME PEER]\n", argv[0]);
    return 1;
  }
  libbpf_set_print(nullptr);
  report("bpf_syscall", check_bpf_syscall());
  report("btf_vmlinux", check_btf());
  report("xdp_test_run", check_test_run());
  report("xdp_test_run_meta", check_test_run_meta());
  report("xdp_live_frames", check_live_frames());
  report("xdp_frags", check_frags());
  report("xdp_helpers", check_helpers());
  report("bpf_map_types", check_map_types());
  report("xsk_socket", check_xsk_socket());
  if (argc == 3) {
    report("xdp_native_veth", check_xdp_native(argv[1]));
    Outcome bind_o, rx_o, tx_o;
    check_xsk_traffic(argv[1], argv[2], &bind_o, &rx_o, &tx_o);
    report("xsk_bind_veth_copy", bind_o);
    report("xsk_rx_veth_meta", rx_o);
    report("xsk_tx_veth", tx_o);
    report("tc_clsact_bpf", check_tc_bpf(argv[1]));
  }
  return 0;
}
