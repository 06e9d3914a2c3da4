// LiveTx: a TX backend that sends frames as XDP "live frames".
//
// User space writes complete frames (Ethernet .. ICRC) into slots of an
// mmapped BPF array map and lists them in a descriptor ring; submit() runs
// bpf/mrc_tx.bpf.c with BPF_PROG_TEST_RUN + BPF_F_TEST_XDP_LIVE_FRAMES and
// repeat = frames queued. Every run of the program copies one slot into a
// page-pool frame and XDP_REDIRECTs it through a DEVMAP to the frame's port:
// no skb, one syscall per submit. On veth the frame reaches the peer as an
// xdp_frame (veth_xdp_xmit), where the peer's XDP program sees it.
//
// Documentation/xdp-tx.md has the design, the limits and the figures.
//
//   LiveTxConfig cfg;
//   cfg.ports = {{"eth1"}, {"eth2", "ns-b"}};    // port 0, 1 (name, namespace)
//   auto tx = LiveTx::create(cfg);               // needs CAP_BPF + CAP_NET_ADMIN
//   LiveTxFrame f[64];
//   uint32_t k = tx->reserve(/*port=*/0, f);     // 0: every slot is queued: submit()
//   for (uint32_t i = 0; i < k; ++i) f[i].len = build(f[i].data, f[i].room);
//   tx->commit({f, k});                          // queued in this order; len 0 cancels
//   auto sent = tx->submit();                    // one BPF_PROG_TEST_RUN for all
//
// Not thread-safe: one engine thread owns a LiveTx. The frames leave from the
// CPU that calls submit(); drivers pick their XDP TX queue (veth: the peer's
// RX queue) from that CPU number.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "mrc/result.hpp"
#include "mrc/uapi/tx.h"

namespace mrc::xdp {

struct LiveTxPort {
  std::string ifname;
  // Network namespace of the interface: "" = the calling thread's; a name =
  // /run/netns/<name> (ip netns); a path starting with '/' = that file.
  std::string netns;
};

struct LiveTxConfig {
  std::vector<LiveTxPort> ports;  // port i = ports[i] (BPF port i + 1), at most 15
  uint32_t slots = 512;           // frame slots, power of two in [64, 65536]; 4 KiB each
  // Frames the kernel runs per inner batch (BPF_PROG_TEST_RUN batch_size,
  // 1..256): frames of a batch are flushed to the drivers together. Keep it
  // at or below the receiving ring (veth: 256 per peer queue).
  uint32_t batch = 64;
  // commit() calls submit() once this many frames are queued (0 = never;
  // only explicit submit() calls send).
  uint32_t auto_submit = 0;
  // Count what the drivers did with the frames (xmit_sent, xmit_drops,
  // redirect_err) with two tp_btf programs (needs CAP_PERFMON or root). If
  // they cannot be loaded or attached, LiveTx works without them and
  // xmit_counted() says so.
  bool count_xmit = true;
  // Keep mrc_tx in the kernel's XDP dispatcher by attaching it (generic
  // mode) to the loopback device of a private, empty network namespace.
  // Without it every BPF_PROG_TEST_RUN with repeat > 1 adds the program to
  // the dispatcher and removes it again, two synchronize_rcu() calls: about
  // 30 ms per submit on the test VM. Needs CAP_SYS_ADMIN (unshare).
  bool dispatcher_keepalive = true;
  // Retries of a submit whose BPF_PROG_TEST_RUN was interrupted (EINTR) or
  // ran out of memory (ENOMEM) before every frame was taken.
  uint32_t max_retries = 8;
};

// A slot reserved for one frame: write up to room bytes at data, set len.
struct LiveTxFrame {
  uint8_t* data = nullptr;
  uint32_t len = 0;
  uint32_t room = 0;  // largest frame this port takes (max_frame(port))
  uint32_t slot = 0;
  uint16_t port = 0;  // 0-based port index
};

struct LiveTxPortInfo {
  std::string ifname;
  std::string netns;  // as configured
  int ifindex = 0;    // in the interface's namespace
  uint32_t mtu = 0;
  uint32_t max_frame = 0;  // min(live-mode limit, mtu + 14 + 4)
  uint64_t netns_cookie = 0;
};

// Counters kept in user space, plus the drivers' feedback the tracing
// programs write into the mmapped control block (no syscall to read).
struct LiveTxCounters {
  uint64_t reserved = 0;   // slots handed out by reserve()
  uint64_t ring_full = 0;  // reserve() calls that got fewer slots than asked
  uint64_t committed = 0;  // frames queued by commit()
  uint64_t committed_bytes = 0;
  uint64_t cancelled = 0;        // slots returned by cancel() or commit() with len 0
  uint64_t commit_oversize = 0;  // commit() with len > room: dropped, never queued
  uint64_t bad_port = 0;         // reserve() for a port that does not exist
  uint64_t misuse = 0;           // commit()/cancel() of a slot that was not reserved
  uint64_t submits = 0;          // BPF_PROG_TEST_RUN calls
  uint64_t submit_frames = 0;    // frames the program took
  uint64_t submit_retries = 0;   // calls repeated after EINTR/ENOMEM
  uint64_t submit_errors = 0;    // calls that failed
  uint64_t lost = 0;             // queued frames dropped because submits kept failing
  uint64_t auto_submits = 0;     // submits started by commit() (auto_submit)
  uint64_t redirected = 0;       // frames the program redirected (MRC_TX_ST_REDIRECTED)
  uint64_t prog_errors = 0;      // frames the program dropped (any other status)
  uint64_t status[16] = {};      // frames by mrc_tx_status
  // From the xdp tracepoints (all ports; per port: feedback()).
  uint64_t xmit_sent = 0;
  uint64_t xmit_drops = 0;
  uint64_t redirect_err = 0;
  uint64_t submit_ns = 0;  // time spent in BPF_PROG_TEST_RUN
};

class LiveTx {
 public:
  static Result<LiveTx> create(const LiveTxConfig& cfg);

  LiveTx();
  LiveTx(LiveTx&&) noexcept;
  LiveTx& operator=(LiveTx&&) noexcept;
  LiveTx(const LiveTx&) = delete;
  LiveTx& operator=(const LiveTx&) = delete;
  ~LiveTx();

  explicit operator bool() const { return s_ != nullptr; }

  // ---- data path (no allocation, no syscall except in submit()) ----
  // Up to out.size() slots for port; fewer (possibly 0) when the queued and
  // reserved frames fill the ring: submit(), then reserve again.
  uint32_t reserve(uint16_t port, std::span<LiveTxFrame> out);
  // Queues frames in this order (each len set; len 0 = cancel; len > room
  // is counted in commit_oversize and dropped).
  void commit(std::span<const LiveTxFrame> frames);
  // Returns reserved, uncommitted slots.
  void cancel(std::span<const LiveTxFrame> frames);
  // Sends every queued frame: one BPF_PROG_TEST_RUN (more after EINTR or
  // ENOMEM, at most max_retries). Returns the frames the program took. When
  // the kernel keeps failing, the frames not taken are dropped and counted
  // in `lost`, and the error comes back with context.
  Result<uint32_t> submit();

  uint32_t pending() const;     // committed, not yet submitted
  uint32_t free_slots() const;  // neither reserved nor queued
  uint32_t slots() const;

  // ---- facts ----
  // Largest frame BPF_PROG_TEST_RUN live mode takes on this kernel (probed
  // at create()): 4096 - 256 (XDP headroom) - the page head - 320
  // (skb_shared_info) on x86-64: 3408 bytes on 6.18, 3368 on 6.1 (whose page
  // head also holds the xdp_frame).
  uint32_t max_frame() const;
  uint32_t max_frame(uint16_t port) const;
  uint16_t port_count() const;
  const LiveTxPortInfo& port(uint16_t port) const;  // empty for no such port
  bool xmit_counted() const;                        // tracing programs attached
  bool dispatcher_pinned() const;                   // keepalive attachment in place
  // Reasons for degraded operation found by create() (e.g. no tracing).
  const std::vector<std::string>& notes() const;

  // ---- observability ----
  // Updates the tracepoint feedback and returns every counter (no syscall).
  const LiveTxCounters& counters();
  // Per-port feedback from the tracepoints (xmit_sent/drops, redirect_err).
  mrc_tx_port_fb feedback(uint16_t port) const;
  // mrc_tx_stats of a port summed over CPUs (a syscall); kNoPort = key 0.
  static constexpr uint16_t kNoPort = 0xffff;
  Result<mrc_tx_stats> stats(uint16_t port) const;
  // Error of the last automatic submit (auto_submit), if it failed.
  const Error* last_error() const;

  // Re-reads the MTU of every port (after a link change) and updates the
  // largest frame the program accepts.
  Status refresh();

  int prog_fd() const;
  int map_fd(const char* name) const;  // "mrc_tx_stats", "mrc_tx_devmap", ...

  struct State;

 private:
  std::unique_ptr<State> s_;
};

// Largest frame BPF_PROG_TEST_RUN with BPF_F_TEST_XDP_LIVE_FRAMES accepts
// for an XDP program (binary search with data_size_in, repeat 1), or an
// error when the kernel has no live frames (before 5.18) or refuses the run.
Result<uint32_t> probe_live_frame_limit(int xdp_prog_fd);

}  // namespace mrc::xdp
