// libmrc's transmit path: the core::TxSink the engine writes its frames
// into, over the AF_XDP sockets' TX rings or XDP live frames (xdp::LiveTx,
// Documentation/xdp-tx.md), with the fallback between them.
//
// AF_XDP: frames are reserved per port in bursts of kBurst from the TX ring
// of the port's sending socket, and the committed ones are submitted a
// burst at a time. Live frames: slots are reserved per port in small bursts;
// committed frames are staged (in send order) and go out every live_submit
// frames as one BPF_PROG_TEST_RUN. At the end of an iteration (finish())
// fewer than live_min staged frames are copied to the AF_XDP TX rings
// instead: a live submit has a fixed cost (the kernel builds a page pool per
// call, ~10-15 us) that a handful of ACKs should not pay.
//
// Frames for this host itself (destination MAC = source MAC: a QP whose peer
// is on the same host, e.g. another process served by the same mrc-serviced;
// Context::resolve gives the port's own MAC for the port's own address) are
// not sent: commit copies them into the loopback buffer, and the engine loop
// hands them to the engine's rx at its next pass, as if they had arrived on
// the same port (a NIC's internal loopback). The buffer is allocated at the
// first such frame; when it is full the frame is dropped and counted (the
// engine repairs it as any loss).
//
// Used by the engine loop alone (engine_loop.cc), under the engine lock.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "core/engine.hpp"
#include "mrc/mrc.hpp"
#include "xdp/device.hpp"
#include "xdp/live_tx.hpp"

namespace mrc::lib {

// Frames the engine loop receives, completes and sends per burst.
constexpr size_t kBurst = 64;
// Data frames that leave with the control frames ahead of a larger burst
// (engine_loop.cc: the SACKs do not wait for the burst's build).
constexpr size_t kCtrlLead = 16;
// Live-frames slots reserved per port at a time (what an iteration does not
// use goes back at its end).
constexpr uint32_t kLiveReserve = 16;
// Loopback buffer: bytes and frames one transmit may loop (4 rounds of
// kBurst frames of up to 16 KiB each: the engine loop's transmit at most).
constexpr size_t kLoopBytes = size_t(4) * kBurst * 16384;
constexpr size_t kLoopFrames = size_t(4) * kBurst;

// Plane port number -> index in the device's ports, -1 if absent.
using PortIndex = std::array<int, core::kMaxPorts + 1>;

class DeviceTxSink final : public core::TxSink {
 public:
  // dev, idx and tx_socket (per port index: the socket that sends) outlive
  // the sink and do not change under it. live: the live-frames backend, or
  // nullptr for the AF_XDP TX rings alone; o: its live_tx_* options.
  DeviceTxSink(xdp::Device& dev, const PortIndex& idx, const std::vector<uint16_t>& tx_socket,
               size_t nports, xdp::LiveTx* live, const DeviceOptions& o);

  // The engine whose packets' hold (TxPkt::hold, EngineConfig::cc_qa_fabric)
  // ends when their frames have left: when each live-frames submission
  // returns (Engine::tx_done), which sends at once, in the middle of a
  // transmit, not only at the end of the pass.
  void track_holds(core::Engine* eng) { hold_eng_ = eng; }

  uint8_t* alloc(uint8_t port, uint32_t* cap) override;
  void commit(uint8_t port, uint32_t len) override;
  // The end of a transmit: unused reservations back, what is staged out.
  void finish();

  // Looped frames committed since the last loop_clear(), in commit order;
  // valid until loop_clear().
  std::span<const core::RxFrame> looped() const { return {loop_frames_.data(), nloop_}; }
  void loop_clear() {
    nloop_ = 0;
    loop_used_ = 0;
  }
  uint64_t loop_frames() const { return loop_count_; }
  uint64_t loop_drops() const { return loop_drops_; }

 private:
  struct PortTx {
    std::array<xdp::TxFrame, kBurst> frames;
    uint32_t reserved = 0, used = 0;
    std::array<xdp::TxFrame, kBurst> out;
    uint32_t committed = 0;
  };
  struct LivePort {
    std::array<xdp::LiveTxFrame, kLiveReserve> frames;
    uint32_t reserved = 0, used = 0;
  };

  core::Engine* hold_eng_ = nullptr;

  xdp::XskSocket& socket(size_t i) { return dev_.sockets()[tx_socket_[i]]; }
  xdp::TxFrame* xsk_alloc(size_t i);
  void flush_port(size_t i);
  uint8_t* live_alloc(uint16_t i, uint32_t* cap);
  void live_commit(uint8_t port, size_t i, uint32_t len);
  void live_send();
  void live_to_xsk();
  // True when the frame is for this host (copied to the loopback buffer or
  // dropped): the caller cancels its buffer.
  bool loop(uint8_t port, const uint8_t* data, uint32_t len);

  xdp::Device& dev_;
  const PortIndex& idx_;
  const std::vector<uint16_t>& tx_socket_;
  std::vector<PortTx> ports_;
  std::vector<LivePort> lports_;
  std::vector<xdp::LiveTxFrame> staged_;  // capacity live_submit, made once
  uint32_t nstaged_ = 0;
  xdp::LiveTx* live_ = nullptr;
  uint32_t live_submit_ = kBurst, live_min_ = 0;
  std::vector<uint8_t> loop_buf_;  // kLoopBytes, made at the first looped frame
  std::vector<core::RxFrame> loop_frames_;
  uint32_t loop_used_ = 0, nloop_ = 0;
  uint64_t loop_count_ = 0, loop_drops_ = 0;
};

}  // namespace mrc::lib
