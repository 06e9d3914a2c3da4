// Owner of one loaded copy of bpf/mrc_tx.bpf.c, the live-frames TX program
// (Documentation/xdp-tx.md): sized ring maps, optional tracing programs for
// driver feedback. The TX logic over it is user/xdp/live_tx.
#pragma once

#include <cstdint>
#include <string>

#include "loader/skeleton.hpp"
#include "mrc/result.hpp"
#include "util/mmap_area.hpp"

namespace mrc::loader {

class MrcTx {
 public:
  MrcTx() = default;
  // Opens mrc_tx with `slots` ring slots (a power of two) and loads it;
  // with_tracing: also the two tp_btf programs that count driver feedback.
  static Result<MrcTx> open_and_load(uint32_t slots, bool with_tracing);

  int prog_fd() const;        // mrc_tx: the program BPF_PROG_TEST_RUN runs
  int probe_prog_fd() const;  // mrc_tx_probe: the live-frames size probe
  // A map of the object by name (MRC_TX_MAP_* of include/mrc/uapi/tx.h or
  // the variable name in mrc_tx.bpf.c); negative if there is none.
  int map_fd(const char* name) const;
  // mmap of the BPF_F_MMAPABLE array `name`, read-write: all its entries
  // (value size rounded to 8), page-rounded.
  Result<MmapArea> map_array(const char* name) const;

  // The tracing programs (with_tracing and loaded): attach both, or neither.
  bool tracing_loaded() const;
  Status attach_tracing();

  explicit operator bool() const { return static_cast<bool>(skel_); }

 private:
  explicit MrcTx(Skeleton<::mrc_tx> s) : skel_(std::move(s)) {}
  Skeleton<::mrc_tx> skel_;
};

}  // namespace mrc::loader
