#include "lib/plane_xdp.hpp"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <dirent.h>
#include <fcntl.h>
#include <linux/if_link.h>
#include <net/if.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "loader/log.hpp"

namespace mrc::lib {
namespace {

constexpr const char* kProgName = "mrc_xdp_rx";

std::string err_str(int e) { return std::strerror(e < 0 ? -e : e); }

// The program's name and the ids of the maps it uses.
std::string prog_info(uint32_t id, std::vector<uint32_t>* map_ids) {
  UniqueFd fd(bpf_prog_get_fd_by_id(id));
  if (!fd) return "";
  std::vector<uint32_t> ids(64);
  bpf_prog_info info{};
  uint32_t len = sizeof(info);
  info.nr_map_ids = uint32_t(ids.size());
  info.map_ids = uint64_t(uintptr_t(ids.data()));
  if (bpf_obj_get_info_by_fd(fd.get(), &info, &len)) return "";
  ids.resize(std::min<uint32_t>(info.nr_map_ids, uint32_t(ids.size())));
  *map_ids = std::move(ids);
  return info.name;
}

uint32_t pinned_map_id(const std::string& path) {
  UniqueFd fd(bpf_obj_get(path.c_str()));
  if (!fd) return 0;
  bpf_map_info info{};
  uint32_t len = sizeof(info);
  if (bpf_obj_get_info_by_fd(fd.get(), &info, &len)) return 0;
  return info.id;
}

// Calls fn(info) for each BPF link of the system until it returns true;
// true if one did. Links that vanish or cannot be read are skipped.
template <class F>
bool any_link(F fn) {
  uint32_t id = 0;
  while (bpf_link_get_next_id(id, &id) == 0) {
    UniqueFd fd(bpf_link_get_fd_by_id(id));
    if (!fd) continue;
    bpf_link_info info{};
    uint32_t len = sizeof(info);
    if (bpf_obj_get_info_by_fd(fd.get(), &info, &len)) continue;
    if (fn(info)) return true;
  }
  return false;
}

// True if an XDP BPF link runs program `prog_id`.
bool held_by_link(uint32_t prog_id) {
  return any_link(
      [&](const bpf_link_info& l) { return l.type == BPF_LINK_TYPE_XDP && l.prog_id == prog_id; });
}

// The mrc_xdp that an freplace link attaches to libxdp's dispatcher
// `dispatcher_id` (libxdp pins those links), 0 if none. Found through the
// links rather than libxdp, which keeps descriptors of the programs it
// inspects open and would make this process look like a holder.
uint32_t mrc_xdp_behind(uint32_t dispatcher_id) {
  uint32_t found = 0;
  any_link([&](const bpf_link_info& l) {
    if (l.type != BPF_LINK_TYPE_TRACING || l.tracing.target_obj_id != dispatcher_id) return false;
    std::vector<uint32_t> maps;
    if (prog_info(l.prog_id, &maps) != kProgName) return false;
    found = l.prog_id;
    return true;
  });
  return found;
}

bool all_digits(const char* s) {
  if (!*s) return false;
  for (; *s; s++)
    if (*s < '0' || *s > '9') return false;
  return true;
}

// Does /proc/PID/fdinfo/FD say "prog_id:\tID"? (program and link descriptors)
bool fdinfo_has_prog(const std::string& path, uint32_t prog_id) {
  FILE* f = std::fopen(path.c_str(), "re");
  if (!f) return false;
  char line[256];
  bool hit = false;
  while (!hit && std::fgets(line, sizeof line, f))
    if (std::strncmp(line, "prog_id:", 8) == 0)
      hit = std::strtoul(line + 8, nullptr, 10) == prog_id;
  std::fclose(f);
  return hit;
}

// The processes holding a descriptor of program `prog_id` or of a link to it.
void scan_holders(uint32_t prog_id, std::vector<pid_t>* pids, int* unreadable) {
  DIR* proc = opendir("/proc");
  if (!proc) {
    (*unreadable)++;
    return;
  }
  while (dirent* pe = readdir(proc)) {
    if (!all_digits(pe->d_name)) continue;
    const std::string base = std::string("/proc/") + pe->d_name;
    DIR* fds = opendir((base + "/fd").c_str());
    if (!fds) {
      if (errno != ENOENT) (*unreadable)++;  // ENOENT: it exited meanwhile
      continue;
    }
    bool hit = false;
    while (dirent* fe = readdir(fds)) {
      if (!all_digits(fe->d_name)) continue;
      char target[64];
      const std::string fd_path = base + "/fd/" + fe->d_name;
      ssize_t n = readlink(fd_path.c_str(), target, sizeof target - 1);
      if (n <= 0) continue;
      target[n] = 0;
      if (std::strcmp(target, "anon_inode:bpf-prog") && std::strcmp(target, "anon_inode:bpf_link"))
        continue;
      if (fdinfo_has_prog(base + "/fdinfo/" + fe->d_name, prog_id)) {
        hit = true;
        break;
      }
    }
    closedir(fds);
    if (hit) pids->push_back(pid_t(std::atoi(pe->d_name)));
  }
  closedir(proc);
}

std::string comm(pid_t pid) {
  FILE* f = std::fopen(("/proc/" + std::to_string(pid) + "/comm").c_str(), "re");
  if (!f) return "?";
  char buf[64] = {};
  if (!std::fgets(buf, sizeof buf, f)) buf[0] = 0;
  std::fclose(f);
  std::string s = buf;
  while (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

// Detaches the stale program `h` names from `ifindex`, only if that very
// program is still attached (XDP_FLAGS_REPLACE with it as the expected one).
Status detach_stale(int ifindex, const std::string& ifname, const XdpHolder& h) {
  const std::string ctx = "attaching mrc_xdp to " + ifname + ": detaching the stale mrc_xdp " +
                          std::to_string(h.prog_id);
  UniqueFd old(bpf_prog_get_fd_by_id(h.prog_id));
  if (!old) return Error(errno, ctx);
  LIBBPF_OPTS(bpf_xdp_attach_opts, dopts, .old_prog_fd = old.get());
  const int err = bpf_xdp_detach(ifindex, h.mode_flag | XDP_FLAGS_REPLACE, &dopts);
  if (err) return errno_error(err, ctx);
  loader::log(loader::LogLevel::kWarn,
              "%s: replaced a stale mrc_xdp (program %u) left attached through netlink by a "
              "process that no longer exists",
              ifname.c_str(), h.prog_id);
  return ok_status();
}

}  // namespace

Result<XdpHolder> xdp_holder(int ifindex, const std::string& pin_dir) {
  XdpHolder h;
  h.pin_dir = pin_dir;
  LIBBPF_OPTS(bpf_xdp_query_opts, q);
  int err = bpf_xdp_query(ifindex, 0, &q);
  if (err) return errno_error(err, "querying XDP on ifindex " + std::to_string(ifindex));
  if (q.drv_prog_id) {
    h.prog_id = q.drv_prog_id;
    h.mode_flag = XDP_FLAGS_DRV_MODE;
  } else if (q.skb_prog_id) {
    h.prog_id = q.skb_prog_id;
    h.mode_flag = XDP_FLAGS_SKB_MODE;
  } else if (q.hw_prog_id) {
    h.prog_id = q.hw_prog_id;
    h.mode_flag = XDP_FLAGS_HW_MODE;
  } else {
    h.prog_id = q.prog_id;
  }
  if (!h.prog_id) return h;
  std::vector<uint32_t> maps;
  h.prog_name = prog_info(h.prog_id, &maps);
  h.mrc_xdp = h.prog_name == kProgName;
  if (h.prog_name == "xdp_dispatcher") {
    // libxdp's dispatcher: is mrc_xdp one of the programs behind it?
    if (const uint32_t id = mrc_xdp_behind(h.prog_id)) {
      h.prog_id = id;
      h.mrc_xdp = h.dispatcher = true;
      h.prog_name = prog_info(h.prog_id, &maps);
    }
  }
  h.link = held_by_link(h.prog_id);
  if (h.mrc_xdp && !pin_dir.empty()) {
    const uint32_t cfg = pinned_map_id(pin_dir + "/mrc_cfg");
    h.mrcd = cfg && std::find(maps.begin(), maps.end(), cfg) != maps.end();
  }
  scan_holders(h.prog_id, &h.pids, &h.unreadable);
  return h;
}

std::string XdpHolder::describe() const {
  if (!prog_id) return "nothing";
  std::string s;
  if (!mrc_xdp) {
    s = "another XDP program (" + (prog_name.empty() ? std::string("?") : prog_name) + ", id " +
        std::to_string(prog_id) + ")";
  } else if (mrcd) {
    s = "mrcd's mrc_xdp (program " + std::to_string(prog_id) + ", maps pinned in " + pin_dir +
        "; open the device through mrcd)";
  } else {
    s = "mrc_xdp (program " + std::to_string(prog_id) + ")";
  }
  if (dispatcher) {
    s += " behind libxdp's dispatcher";
    if (pids.empty()) s += " (pinned by libxdp in bpffs; xdp-loader unload removes it)";
  }
  if (!pids.empty()) {
    s += pids.size() == 1 ? " of pid " : " of pids ";
    for (size_t i = 0; i < pids.size(); i++) {
      if (i) s += ", ";
      s += std::to_string(pids[i]) + " (" + comm(pids[i]) + ")";
    }
  }
  s += link ? ", attached through a BPF link" : ", attached through netlink";
  if (unreadable)
    s += "; the descriptors of " + std::to_string(unreadable) + " processes could not be read";
  return s;
}

std::string PlaneXdp::describe() const {
  std::string s = ifname_ + ": " + std::string(loader::to_string(mode_)) + ", " +
                  (link_ ? std::string("bpf_link") : std::string("netlink"));
  if (!notes_.empty()) s += " (" + notes_ + ")";
  return s;
}

Result<PlaneXdp> PlaneXdp::attach(const loader::MrcXdp& prog, const std::string& ifname,
                                  bool generic_only, const std::string& pin_dir) {
  loader::install_library_logging();
  const std::string ctx = "attaching mrc_xdp to " + ifname;
  if (!prog.loaded()) return make_error(EINVAL, ctx + ": the program is not loaded");
  const int idx = int(if_nametoindex(ifname.c_str()));
  if (!idx) return Error(errno, ctx + ": no such interface");
  PlaneXdp p;
  p.ifname_ = ifname;

  auto h = xdp_holder(idx, pin_dir);
  if (!h) return std::move(h).error().wrap(ctx);
  if (h->prog_id && !h->stale()) {
    if (h->mrc_xdp) return make_error(EBUSY, ctx + ": held by " + h->describe());
    // Not mrc_xdp: never replaced, but libxdp's dispatcher may run both where
    // the kernel allows it.
    Status s = p.attach_libxdp(prog, generic_only, "another XDP program is attached");
    if (!s) {
      std::string why = s.error().context;
      if (why.rfind(ctx + ": ", 0) == 0) why.erase(0, ctx.size() + 2);
      return make_error(EBUSY, ctx + ": held by " + h->describe() + " (" + why + ")");
    }
    return p;
  }
  if (h->prog_id) {
    MRC_TRY(detach_stale(idx, ifname, *h));
    p.notes_ = "replaced the stale mrc_xdp " + std::to_string(h->prog_id);
  }

  // 1. A BPF link owned by this process.
  std::vector<loader::XdpMode> modes;
  if (!generic_only) modes.push_back(loader::XdpMode::kNative);
  modes.push_back(loader::XdpMode::kGeneric);
  std::string link_notes;
  for (loader::XdpMode m : modes) {
    LIBBPF_OPTS(bpf_link_create_opts, lopts);
    lopts.flags = m == loader::XdpMode::kNative ? XDP_FLAGS_DRV_MODE : XDP_FLAGS_SKB_MODE;
    int fd = bpf_link_create(prog.prog_fd(), idx, BPF_XDP, &lopts);
    if (fd >= 0) {
      p.link_.reset(fd);
      p.mode_ = m;
      if (!link_notes.empty()) p.notes_ += (p.notes_.empty() ? "" : "; ") + link_notes;
      loader::log(loader::LogLevel::kInfo, "%s", p.describe().c_str());
      return p;
    }
    const int e = errno;
    link_notes += std::string(link_notes.empty() ? "" : "; ") + "bpf_link " +
                  std::string(loader::to_string(m)) + ": " + err_str(e);
    if (e == EBUSY || e == EEXIST) {
      // Someone attached meanwhile.
      auto again = xdp_holder(idx, pin_dir);
      return make_error(EBUSY, ctx + ": held by " + (again ? again->describe() : link_notes));
    }
  }

  // 2. No link (an older kernel): libxdp / netlink, detached by the destructor only.
  if (Status s = p.attach_libxdp(prog, generic_only, link_notes); !s) {
    Error e = std::move(s).error();
    e.context += " (" + link_notes + ")";
    return e;
  }
  return p;
}

Status PlaneXdp::attach_libxdp(const loader::MrcXdp& prog, bool generic_only,
                               const std::string& why) {
  loader::AttachOptions ao;
  ao.generic_only = generic_only;
  auto a = loader::MrcXdpAttachment::attach(prog, ifname_, ao);
  if (!a) return std::move(a).error();
  mode_ = a->info().mode;
  notes_ += (notes_.empty() ? "" : "; ") + why + "; " + a->info().describe();
  legacy_.emplace(std::move(*a));
  loader::log(loader::LogLevel::kWarn,
              "%s (not a BPF link: a process that dies without closing the device leaves it "
              "attached)",
              describe().c_str());
  return ok_status();
}

Result<std::vector<PlaneXdp>> attach_planes(const loader::MrcXdp& prog,
                                            const std::vector<std::string>& ifnames,
                                            bool generic_only, const std::string& pin_dir) {
  std::vector<PlaneXdp> out;
  out.reserve(ifnames.size());
  for (const auto& n : ifnames) {
    auto a = PlaneXdp::attach(prog, n, generic_only, pin_dir);
    if (!a) return std::move(a).error();  // `out` detaches what was attached
    out.push_back(std::move(*a));
  }
  return out;
}

}  // namespace mrc::lib
