// Internal: the heap-resident state behind a Umem handle. Sockets keep a
// pointer to it, so it must not move while sockets exist (it never does: the
// Umem handle only moves the owning pointer).
#pragma once

#include <xdp/xsk.h>

#include "util/mmap_area.hpp"
#include "util/unique_fd.hpp"
#include "xdp/umem.hpp"

namespace mrc::xdp {

struct Umem::State {
  UmemConfig cfg;
  MmapArea area;  // declared before umem: unmapped after the UMEM is deleted
  uint64_t size = 0;
  bool huge = false;
  xsk_umem* umem = nullptr;
  // The fill/completion rings libxdp maps when the UMEM is created; the first
  // socket of the UMEM uses these (libxdp requires the same ring structs).
  xsk_ring_prod fill0{};
  xsk_ring_cons comp0{};
  bool first_ring_taken = false;
  FramePool pool;
  FramePool tx_pool;     // multi-buffer TX frames (tx_chunks > 1)
  uint64_t tx_base = 0;  // their first address; the shared pool lies below
  uint32_t sockets = 0;
  bool need_wakeup = true;  // the first socket's choice; shared sockets inherit it

  State() = default;
  State(const State&) = delete;
  State& operator=(const State&) = delete;
  ~State();
};

}  // namespace mrc::xdp
