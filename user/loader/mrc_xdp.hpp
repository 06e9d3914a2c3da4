// Owner of one loaded copy of bpf/mrc_xdp.bpf.c (the libbpf skeleton
// mrc_xdp_skel): open, optionally reuse maps pinned by an earlier run, load,
// write the configuration, pin. Attaching to interfaces is attach.hpp.
#pragma once

#include <memory>
#include <string>

#include "loader/skeleton.hpp"
#include "loader/xdp_maps.hpp"
#include "mrc/result.hpp"

struct bpf_object;

namespace mrc::loader {

struct LoadOptions {
  mrc_xdp_cfg cfg = default_xdp_cfg();
  // Non-empty: maps already pinned there are reused (their contents survive a
  // restart: QP table, XSK entries, counters) and missing ones are pinned
  // there after the load. The directory must be on a bpffs.
  std::string pin_dir;
};

class MrcXdp {
 public:
  MrcXdp(MrcXdp&&) noexcept = default;
  MrcXdp& operator=(MrcXdp&&) noexcept = default;

  // Opens the embedded object (no kernel objects yet).
  static Result<MrcXdp> open();
  // open() + pin setup + load() + set_cfg().
  static Result<MrcXdp> open_and_load(const LoadOptions& opts = {});

  // Before load(): every map gets the pin path dir/<name>; libbpf reuses a
  // compatible pinned map and pins the others during load().
  Status set_pin_dir(const std::string& dir);
  // Loads program and maps into the kernel and writes `cfg`.
  Status load(const mrc_xdp_cfg& cfg = default_xdp_cfg());

  // After load(): pins all maps under `dir` (created if missing).
  Status pin_maps(const std::string& dir);
  // Removes the pins of all maps under `dir` and the directory if empty.
  Status unpin_maps(const std::string& dir);

  bool loaded() const { return loaded_; }
  XdpMaps& maps() { return maps_; }
  const XdpMaps& maps() const { return maps_; }
  int prog_fd() const;
  bpf_object* object() const;
  ::mrc_xdp* skeleton() const { return skel_.get(); }

 private:
  explicit MrcXdp(Skeleton<::mrc_xdp> s) : skel_(std::move(s)) {}
  Skeleton<::mrc_xdp> skel_;
  XdpMaps maps_;
  bool loaded_ = false;
};

}  // namespace mrc::loader
