// The controller state in BPF maps pinned on a bpffs (include/mrc/uapi/ctl.h,
// bpf/mrc_ctl.bpf.c). mrcd creates or re-opens the maps with create_or_open()
// (libbpf reuses compatible pinned maps, so a restart keeps every profile);
// applications and tools open the pins with open(). The mmapable arrays are
// mapped into the process: reading policy costs no syscall.
#pragma once

#include <array>
#include <memory>
#include <string>

#include "ctl/store.hpp"
#include "mrc/result.hpp"
#include "util/mmap_area.hpp"
#include "util/unique_fd.hpp"

namespace mrc::ctl {

enum class Access : uint8_t {
  kReadWrite,   // mrcd: every map writable
  kReadMostly,  // applications: records mapped read-only (but mrc_ctl_dev, for the report
                // counters); queue and report tables writable
};

class PinnedStore final : public Store {
 public:
  ~PinnedStore() override = default;

  // Creates the maps (or reuses those pinned under `dir`) and pins them.
  // `*found` tells whether the maps were already pinned.
  static Result<std::unique_ptr<PinnedStore>> create_or_open(const std::string& dir,
                                                             bool* found = nullptr);
  // Opens maps pinned by mrcd. ENOENT when mrcd never ran; EPROTO when the
  // pinned layout does not match this build.
  static Result<std::unique_ptr<PinnedStore>> open(const std::string& dir, Access access);
  // Removes the pins (the maps live on while someone holds them).
  static Status unpin(const std::string& dir);

  Status push_report(const mrc_ctl_ev_report& r) override;
  Result<size_t> pop_reports(std::span<mrc_ctl_ev_report> out) override;
  Status put_qp(const mrc_ctl_qp_key& k, const mrc_ctl_qp_report& v) override;
  Status del_qp(const mrc_ctl_qp_key& k) override;
  Result<QpList> list_qps() const override;
  Status put_evstat(const mrc_ctl_evstat_key& k, const mrc_ctl_evstat& v) override;
  Status del_evstat(const mrc_ctl_evstat_key& k) override;
  Result<EvStatList> list_evstats() const override;

  const std::string& dir() const { return dir_; }
  int evq_fd() const { return fds_[kEvq].get(); }

 private:
  PinnedStore() = default;
  Status map_all(Access access);

  // Indexes of fds_: the six mmapable arrays (mapped in maps_), then the
  // report queue, the QP table and the EV statistics.
  static constexpr size_t kMmapable = 6, kEvq = 6, kQps = 7, kEvStat = 8, kMapCount = 9;

  std::string dir_;
  std::array<UniqueFd, kMapCount> fds_;
  std::array<MmapArea, kMmapable> maps_;
};

}  // namespace mrc::ctl
