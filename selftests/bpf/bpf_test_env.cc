#include "bpf_test_env.hpp"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <unistd.h>
#include <xdp/xsk.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>

namespace mrc::testing {

static_assert(sizeof(xsk_ring_cons) <= 64 && sizeof(xsk_ring_prod) <= 64, "ring storage");

namespace {

// Loads "r0 = XDP_PASS; exit" to see whether BPF_PROG_TEST_RUN works.
std::string probe_test_run() {
  struct bpf_insn insns[] = {
      {BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_0, 0, 0, XDP_PASS},
      {BPF_JMP | BPF_EXIT, 0, 0, 0, 0},
  };
  int fd = bpf_prog_load(BPF_PROG_TYPE_XDP, "mrc_probe", "GPL", insns, 2, nullptr);
  if (fd < 0) return std::string("cannot load an XDP program: ") + std::strerror(errno);
  std::vector<uint8_t> pkt(64, 0);
  LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = pkt.data(), .data_size_in = uint32_t(pkt.size()),
              .repeat = 1);
  int err = bpf_prog_test_run_opts(fd, &o);
  close(fd);
  if (err) return std::string("BPF_PROG_TEST_RUN failed: ") + std::strerror(errno);
  if (o.retval != XDP_PASS) return "BPF_PROG_TEST_RUN returned a wrong action";
  return "";
}

}  // namespace

const std::string& bpf_skip_reason() {
  static const std::string reason = [] {
    if (geteuid() != 0) return std::string("needs root (BPF, network namespaces)");
    std::string r = probe_test_run();
    if (!r.empty()) return r;
    return std::string();
  }();
  return reason;
}

Status enter_private_namespaces() {
  static bool done = false;
  if (done) return ok_status();
  if (unshare(CLONE_NEWNET | CLONE_NEWNS)) return Error(errno, "unshare(CLONE_NEWNET|CLONE_NEWNS)");
  if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr))
    return Error(errno, "making mounts private");
  done = true;
  return run_cmd("ip link set lo up");
}

Status run_cmd(const std::string& cmd) {
  std::string full = cmd + " 2>&1";
  FILE* f = popen(full.c_str(), "r");
  if (!f) return Error(errno, "running " + cmd);
  std::string out;
  std::array<char, 256> buf;
  while (fgets(buf.data(), int(buf.size()), f)) out += buf.data();
  int st = pclose(f);
  if (st != 0) return Error(EIO, "'" + cmd + "' failed: " + out);
  return ok_status();
}

Status make_veth(const std::string& a, const std::string& b) {
  MRC_TRY(run_cmd("ip link add " + a + " type veth peer name " + b));
  MRC_TRY(run_cmd("ip link set " + a + " up"));
  return run_cmd("ip link set " + b + " up");
}

XskSocket::~XskSocket() {
  if (xsk_) xsk_socket__delete(xsk_);
  if (umem_) xsk_umem__delete(umem_);
  if (umem_area_) munmap(umem_area_, umem_size_);
}

Status XskSocket::open(const std::string& ifname, uint32_t queue) {
  constexpr uint32_t kFrames = 64, kFrameSize = 4096;
  umem_size_ = size_t(kFrames) * kFrameSize;
  umem_area_ =
      mmap(nullptr, umem_size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (umem_area_ == MAP_FAILED) {
    umem_area_ = nullptr;
    return Error(errno, "mmap of the UMEM");
  }
  auto* fill = reinterpret_cast<xsk_ring_prod*>(rings_[0]);
  auto* comp = reinterpret_cast<xsk_ring_cons*>(rings_[1]);
  auto* rx = reinterpret_cast<xsk_ring_cons*>(rings_[2]);
  auto* tx = reinterpret_cast<xsk_ring_prod*>(rings_[3]);
  xsk_umem_config ucfg{};
  ucfg.fill_size = kFrames;
  ucfg.comp_size = kFrames;
  ucfg.frame_size = kFrameSize;
  ucfg.frame_headroom = 0;
  int err = xsk_umem__create(&umem_, umem_area_, umem_size_, fill, comp, &ucfg);
  if (err) return errno_error(err, "xsk_umem__create");
  xsk_socket_config scfg{};
  scfg.rx_size = kFrames;
  scfg.tx_size = kFrames;
  scfg.libxdp_flags = XSK_LIBXDP_FLAGS__INHIBIT_PROG_LOAD;
  scfg.bind_flags = XDP_COPY;
  err = xsk_socket__create(&xsk_, ifname.c_str(), queue, umem_, rx, tx, &scfg);
  if (err) return errno_error(err, "binding an AF_XDP socket (copy mode) to " + ifname);
  return ok_status();
}

int XskSocket::fd() const { return xsk_ ? xsk_socket__fd(xsk_) : -1; }

Result<TestRun> xdp_test_run(int prog_fd, const std::vector<uint8_t>& frame, uint32_t ifindex,
                             uint32_t rx_queue, uint32_t repeat) {
  TestRun r;
  r.out.resize(frame.size() + 512);
  xdp_md ctx_in{}, ctx_out{};
  ctx_in.data_end = uint32_t(frame.size());
  ctx_in.ingress_ifindex = ifindex;
  ctx_in.rx_queue_index = rx_queue;
  LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = frame.data(), .data_out = r.out.data(),
              .data_size_in = uint32_t(frame.size()), .data_size_out = uint32_t(r.out.size()),
              .ctx_in = &ctx_in, .ctx_out = &ctx_out, .ctx_size_in = sizeof(ctx_in),
              .ctx_size_out = sizeof(ctx_out), .repeat = int(repeat));
  if (bpf_prog_test_run_opts(prog_fd, &o)) return Error(errno, "BPF_PROG_TEST_RUN");
  r.action = o.retval;
  r.out.resize(o.data_size_out);
  r.meta_len = ctx_out.data;  // the kernel reports the metadata length in xdp_md.data
  r.duration_ns = o.duration;
  return r;
}

std::string hex(const std::vector<uint8_t>& v) {
  std::string s;
  char b[4];
  for (size_t i = 0; i < v.size(); i++) {
    std::snprintf(b, sizeof(b), "%02x", v[i]);
    s += b;
    if (i % 16 == 15)
      s += '\n';
    else if (i % 4 == 3)
      s += ' ';
  }
  return s;
}

}  // namespace mrc::testing
