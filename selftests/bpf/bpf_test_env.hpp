// Shared pieces of the bpf-label tests: a private network + mount namespace
// for the test process, veth pairs inside it, an AF_XDP socket (copy mode)
// that can be put into mrc_xsks, and BPF_PROG_TEST_RUN with an xdp_md.
#pragma once

#include <linux/bpf.h>

#include <cstdint>
#include <string>
#include <vector>

#include "mrc/result.hpp"

struct xsk_socket;
struct xsk_umem;

namespace mrc::testing {

// Why the environment cannot run the bpf tests ("" if it can): not root,
// no BPF_PROG_TEST_RUN, no network namespaces. Cached.
const std::string& bpf_skip_reason();

// Moves the calling process into a fresh network and mount namespace (mount
// propagation private), once. Everything created afterwards (veths,
// bpffs mounts) disappears with the process.
Status enter_private_namespaces();

// Runs a shell command (inside our namespaces); error with its output.
Status run_cmd(const std::string& cmd);

// A veth pair created in the private namespace, both ends up.
Status make_veth(const std::string& a, const std::string& b);

// An AF_XDP socket bound in copy mode to `ifname` queue `queue`, without a
// libxdp program (XSK_LIBXDP_FLAGS__INHIBIT_PROG_LOAD).
class XskSocket {
 public:
  XskSocket() = default;
  XskSocket(const XskSocket&) = delete;
  XskSocket& operator=(const XskSocket&) = delete;
  ~XskSocket();
  Status open(const std::string& ifname, uint32_t queue);
  int fd() const;

 private:
  void* umem_area_ = nullptr;
  size_t umem_size_ = 0;
  xsk_umem* umem_ = nullptr;
  xsk_socket* xsk_ = nullptr;
  // rings live in opaque storage so this header does not need <xdp/xsk.h>
  alignas(64) unsigned char rings_[4][64] = {};
};

struct TestRun {
  uint32_t action = 0;
  std::vector<uint8_t> out;  // metadata (meta_len bytes) + frame
  uint32_t meta_len = 0;
  uint32_t duration_ns = 0;
};

// BPF_PROG_TEST_RUN of an XDP program on `frame`.
Result<TestRun> xdp_test_run(int prog_fd, const std::vector<uint8_t>& frame, uint32_t ifindex,
                             uint32_t rx_queue, uint32_t repeat = 1);

std::string hex(const std::vector<uint8_t>& v);

}  // namespace mrc::testing
