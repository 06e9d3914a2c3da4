#include "loader/mrc_xdp.hpp"

#include <bpf/libbpf.h>
#include <sys/stat.h>
#include <unistd.h>

#include <utility>

#include "loader/log.hpp"
#include "mrc_xdp.skel.h"
#include "util/fs.hpp"

namespace mrc::loader {

Result<MrcXdp> MrcXdp::open() {
  install_library_logging();
  auto s = Skeleton<::mrc_xdp>::open();
  if (!s) return std::move(s).error();
  return MrcXdp(std::move(*s));
}

Result<MrcXdp> MrcXdp::open_and_load(const LoadOptions& opts) {
  auto x = open();
  if (!x) return x;
  if (!opts.pin_dir.empty()) MRC_TRY(x->set_pin_dir(opts.pin_dir));
  MRC_TRY(x->load(opts.cfg));
  return x;
}

Status MrcXdp::set_pin_dir(const std::string& dir) {
  if (loaded_) return Error(EBUSY, "pin directory must be set before loading mrc_xdp");
  MRC_TRY(make_dirs(dir, 0700));
  for (const char* name : kMapNames) {
    bpf_map* m = bpf_object__find_map_by_name(skel_->obj, name);
    if (!m) return Error(ENOENT, std::string("map ") + name + " not in mrc_xdp");
    std::string path = dir + "/" + name;
    int err = bpf_map__set_pin_path(m, path.c_str());
    if (err) return errno_error(err, "setting the pin path " + path);
  }
  return ok_status();
}

Status MrcXdp::load(const mrc_xdp_cfg& cfg) {
  if (loaded_) return Error(EALREADY, "mrc_xdp is already loaded");
  MRC_TRY(skel_.load("loading mrc_xdp (verifier or pinned-map mismatch; see libbpf log)"));
  loaded_ = true;
  auto m = XdpMaps::from_object(skel_->obj);
  if (!m) return std::move(m).error();
  maps_ = std::move(*m);
  MRC_TRY(maps_.set_cfg(cfg));
  return ok_status();
}

Status MrcXdp::pin_maps(const std::string& dir) {
  if (!loaded_) return Error(EINVAL, "mrc_xdp is not loaded");
  MRC_TRY(make_dirs(dir, 0700));
  for (const char* name : kMapNames) {
    bpf_map* m = bpf_object__find_map_by_name(skel_->obj, name);
    std::string path = dir + "/" + name;
    const char* cur = bpf_map__pin_path(m);
    if (bpf_map__is_pinned(m) && cur && path == cur) continue;
    int err = bpf_map__pin(m, path.c_str());
    if (err) return errno_error(err, "pinning " + std::string(name) + " at " + path);
  }
  return ok_status();
}

Status MrcXdp::unpin_maps(const std::string& dir) {
  for (const char* name : kMapNames) {
    std::string path = dir + "/" + name;
    if (::unlink(path.c_str()) && errno != ENOENT) return Error(errno, "unpinning " + path);
    if (skel_) {
      bpf_map* m = bpf_object__find_map_by_name(skel_->obj, name);
      const char* cur = m ? bpf_map__pin_path(m) : nullptr;
      if (cur && path == cur) bpf_map__set_pin_path(m, nullptr);
    }
  }
  if (::rmdir(dir.c_str()) && errno != ENOTEMPTY && errno != EEXIST && errno != ENOENT)
    return Error(errno, "removing " + dir);
  return ok_status();
}

int MrcXdp::prog_fd() const { return skel_ ? bpf_program__fd(skel_->progs.mrc_xdp_rx) : -1; }

bpf_object* MrcXdp::object() const { return skel_ ? skel_->obj : nullptr; }

}  // namespace mrc::loader
