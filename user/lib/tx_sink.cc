// libmrc's transmit path (tx_sink.hpp): AF_XDP TX rings, live frames and
// the fallback from the one to the other.
#include "lib/tx_sink.hpp"

#include <algorithm>
#include <cstring>

#include "util/clock.hpp"

namespace mrc::lib {

DeviceTxSink::DeviceTxSink(xdp::Device& dev, const PortIndex& idx,
                           const std::vector<uint16_t>& tx_socket, size_t nports, xdp::LiveTx* live,
                           const DeviceOptions& o)
    : dev_(dev),
      idx_(idx),
      tx_socket_(tx_socket),
      ports_(nports),
      lports_(live ? nports : 0),
      live_(live),
      live_submit_(std::max<uint32_t>(1, std::min(o.live_tx_submit, o.live_tx_slots / 2))),
      live_min_(std::min(o.live_tx_min, live_submit_)) {
  if (live_) staged_.resize(live_submit_);
}

uint8_t* DeviceTxSink::alloc(uint8_t port, uint32_t* cap) {
  const int i = port <= core::kMaxPorts ? idx_[port] : -1;
  if (i < 0) return nullptr;
  if (live_) return live_alloc(uint16_t(i), cap);
  xdp::TxFrame* f = xsk_alloc(size_t(i));
  if (!f) return nullptr;
  *cap = f->room;
  return f->data;
}

void DeviceTxSink::commit(uint8_t port, uint32_t len) {
  const size_t i = size_t(idx_[port]);
  if (live_) return live_commit(port, i, len);
  PortTx& p = ports_[i];
  xdp::TxFrame f = p.frames[p.used++];
  if (!len || loop(port, f.data, len)) {
    socket(i).tx_cancel({&f, 1});
    return;
  }
  f.len = len;
  p.out[p.committed++] = f;
}

// The next reserved AF_XDP frame of port i (nullptr: TX ring full).
xdp::TxFrame* DeviceTxSink::xsk_alloc(size_t i) {
  PortTx& p = ports_[i];
  if (p.used == p.reserved) {
    if (p.committed == kBurst) flush_port(i);
    p.reserved = socket(i).tx_reserve({p.frames.data(), kBurst - p.committed});
    p.used = 0;
    if (!p.reserved) return nullptr;
  }
  return &p.frames[p.used];
}

void DeviceTxSink::flush_port(size_t i) {
  PortTx& p = ports_[i];
  if (p.committed) socket(i).tx_submit({p.out.data(), p.committed}, true);
  p.committed = 0;
}

uint8_t* DeviceTxSink::live_alloc(uint16_t i, uint32_t* cap) {
  LivePort& p = lports_[i];
  if (p.used == p.reserved) {
    p.used = 0;
    p.reserved = live_->reserve(i, p.frames);
    if (!p.reserved && nstaged_) {  // every slot staged or reserved
      live_send();
      p.reserved = live_->reserve(i, p.frames);
    }
    if (!p.reserved) return nullptr;
  }
  xdp::LiveTxFrame& f = p.frames[p.used];
  *cap = f.room;
  return f.data;
}

void DeviceTxSink::live_commit(uint8_t port, size_t i, uint32_t len) {
  LivePort& p = lports_[i];
  xdp::LiveTxFrame& f = p.frames[p.used++];
  if (!len || loop(port, f.data, len)) {
    live_->cancel({&f, 1});
    return;
  }
  f.len = len;
  staged_[nstaged_++] = f;
  if (nstaged_ == live_submit_) live_send();
}

// Errors are counted by LiveTx (submit_errors, lost) and the frames not
// sent are losses the engine recovers from.
void DeviceTxSink::live_send() {
  live_->commit({staged_.data(), nstaged_});
  nstaged_ = 0;
  (void)live_->submit();
  // These frames left in that submission (it ran them through XDP and the
  // planes): their hold ends here, not at the end of the pass.
  if (hold_eng_) hold_eng_->tx_done(mono_ns());
}

// A few staged frames: copied into AF_XDP frames of their ports (in order),
// their slots returned; what does not fit goes out live.
void DeviceTxSink::live_to_xsk() {
  uint32_t k = 0;
  for (; k < nstaged_; k++) {
    const xdp::LiveTxFrame& lf = staged_[k];
    xdp::TxFrame* f = xsk_alloc(lf.port);
    if (!f || f->room < lf.len) break;
    std::memcpy(f->data, lf.data, lf.len);
    PortTx& p = ports_[lf.port];
    xdp::TxFrame out = p.frames[p.used++];
    out.len = lf.len;
    p.out[p.committed++] = out;
  }
  live_->cancel({staged_.data(), k});
  if (k < nstaged_) {
    std::memmove(staged_.data(), staged_.data() + k, (nstaged_ - k) * sizeof(staged_[0]));
    nstaged_ -= k;
    live_send();
  }
  nstaged_ = 0;
}

bool DeviceTxSink::loop(uint8_t port, const uint8_t* data, uint32_t len) {
  if (len < 12 || std::memcmp(data, data + 6, 6) != 0) return false;
  if (loop_buf_.empty()) {
    loop_buf_.resize(kLoopBytes);
    loop_frames_.resize(kLoopFrames);
  }
  if (nloop_ == kLoopFrames || loop_used_ + len > kLoopBytes) {
    loop_drops_++;
    return true;
  }
  uint8_t* d = loop_buf_.data() + loop_used_;
  std::memcpy(d, data, len);
  loop_used_ += (len + 63) & ~63u;
  loop_frames_[nloop_++] = core::RxFrame{d, len, port, 0, {}};
  loop_count_++;
  return true;
}

void DeviceTxSink::finish() {
  if (live_) {
    for (LivePort& p : lports_) {
      if (p.used < p.reserved) live_->cancel({p.frames.data() + p.used, p.reserved - p.used});
      p.used = p.reserved = 0;
    }
    if (nstaged_ >= live_min_)
      live_send();
    else if (nstaged_)
      live_to_xsk();
  }
  for (size_t i = 0; i < ports_.size(); i++) {
    PortTx& p = ports_[i];
    if (p.used < p.reserved) socket(i).tx_cancel({p.frames.data() + p.used, p.reserved - p.used});
    p.used = p.reserved = 0;
    flush_port(i);
  }
}

}  // namespace mrc::lib
