#include "loader/mrc_ctl.hpp"

#include <bpf/libbpf.h>

#include <cerrno>

#include "loader/skeleton.hpp"
#include "mrc_ctl.skel.h"

namespace mrc::loader {

Result<std::vector<UniqueFd>> load_ctl_maps(const std::string& dir,
                                            std::span<const char* const> names) {
  auto skel = Skeleton<::mrc_ctl>::open();
  if (!skel) return std::move(skel).error();
  std::vector<bpf_map*> maps;
  for (const char* name : names) {
    bpf_map* m = bpf_object__find_map_by_name((*skel)->obj, name);
    if (!m) return Error(ENOENT, std::string("map ") + name + " not in mrc_ctl");
    std::string path = dir + "/" + name;
    int err = bpf_map__set_pin_path(m, path.c_str());
    if (err) return errno_error(err, "setting the pin path " + path);
    maps.push_back(m);
  }
  MRC_TRY(skel->load("creating or re-opening the controller maps under " + dir +
                     " (a pinned map of another layout is refused: remove the pins)"));
  std::vector<UniqueFd> fds;
  for (size_t i = 0; i < maps.size(); i++) {
    auto fd = UniqueFd::dup(bpf_map__fd(maps[i]), names[i]);
    if (!fd) return std::move(fd).error();
    fds.push_back(std::move(*fd));
  }
  return fds;
}

}  // namespace mrc::loader
