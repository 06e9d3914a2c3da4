#include "loader/mrc_tx.hpp"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>

#include "mrc_tx.skel.h"

namespace mrc::loader {

Result<MrcTx> MrcTx::open_and_load(uint32_t slots, bool with_tracing) {
  auto s = Skeleton<::mrc_tx>::open();
  if (!s) return std::move(s).error();
  ::mrc_tx* skel = s->get();
  skel->rodata->desc_mask = slots - 1;
  int err = bpf_map__set_max_entries(skel->maps.mrc_tx_slots, slots);
  if (!err) err = bpf_map__set_max_entries(skel->maps.mrc_tx_descs, slots);
  if (!err && !with_tracing) {
    err = bpf_program__set_autoload(skel->progs.mrc_tx_xmit, false);
    if (!err) err = bpf_program__set_autoload(skel->progs.mrc_tx_redir_err, false);
  }
  if (err) return errno_error(err, "sizing mrc_tx");
  MRC_TRY(s->load("loading mrc_tx"));
  return MrcTx(std::move(*s));
}

int MrcTx::prog_fd() const { return skel_ ? bpf_program__fd(skel_->progs.mrc_tx) : -EINVAL; }

int MrcTx::probe_prog_fd() const {
  return skel_ ? bpf_program__fd(skel_->progs.mrc_tx_probe) : -EINVAL;
}

int MrcTx::map_fd(const char* name) const {
  return skel_ ? bpf_object__find_map_fd_by_name(skel_->obj, name) : -EINVAL;
}

Result<MmapArea> MrcTx::map_array(const char* name) const {
  bpf_map* m = skel_ ? bpf_object__find_map_by_name(skel_->obj, name) : nullptr;
  if (!m) return Error(ENOENT, std::string("map ") + name + " not in mrc_tx");
  const size_t elem = (bpf_map__value_size(m) + 7u) & ~size_t{7};
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t len = (elem * bpf_map__max_entries(m) + page - 1) / page * page;
  return MmapArea::map(len, PROT_READ | PROT_WRITE, MAP_SHARED, bpf_map__fd(m), 0,
                       std::string(name) + " (mmap)");
}

bool MrcTx::tracing_loaded() const {
  return skel_ && bpf_program__autoload(skel_->progs.mrc_tx_xmit);
}

Status MrcTx::attach_tracing() {
  if (!tracing_loaded()) return Error(ENOENT, "the mrc_tx tracing programs are not loaded");
  // Links stored in the skeleton are destroyed with it.
  skel_->links.mrc_tx_xmit = bpf_program__attach(skel_->progs.mrc_tx_xmit);
  const int e1 = skel_->links.mrc_tx_xmit ? 0 : errno;
  skel_->links.mrc_tx_redir_err = bpf_program__attach(skel_->progs.mrc_tx_redir_err);
  const int e2 = skel_->links.mrc_tx_redir_err ? 0 : errno;
  if (!e1 && !e2) return ok_status();
  bpf_link__destroy(skel_->links.mrc_tx_xmit);
  bpf_link__destroy(skel_->links.mrc_tx_redir_err);
  skel_->links.mrc_tx_xmit = skel_->links.mrc_tx_redir_err = nullptr;
  return Error(e1 ? e1 : e2, "attaching the xdp tracepoint programs");
}

}  // namespace mrc::loader
