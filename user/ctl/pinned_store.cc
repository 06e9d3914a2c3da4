#include "ctl/pinned_store.hpp"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "loader/mrc_ctl.hpp"
#include "util/fs.hpp"

namespace mrc::ctl {

namespace {

struct MapDesc {
  const char* name;
  uint32_t value_size;
  uint32_t max_entries;
};
// Order: the six mmapable arrays, then queue, qps, evstat (PinnedStore::k*).
const MapDesc kMaps[] = {
    {MRC_CTL_MAP_DEV, sizeof(mrc_ctl_dev), 1},
    {MRC_CTL_MAP_PORT, sizeof(mrc_ctl_port), MRC_CTL_MAX_PORTS},
    {MRC_CTL_MAP_FMT, sizeof(mrc_ctl_fmt), MRC_CTL_MAX_FMT_PROFILES},
    {MRC_CTL_MAP_EVP, sizeof(mrc_ctl_evp), MRC_CTL_MAX_EV_PROFILES},
    {MRC_CTL_MAP_EVS, sizeof(mrc_ctl_ev_entry), MRC_CTL_EV_POOL},
    {MRC_CTL_MAP_CC, sizeof(mrc_ctl_cc), MRC_CTL_MAX_CC_PROFILES},
    {MRC_CTL_MAP_EVQ, sizeof(mrc_ctl_ev_report), MRC_CTL_EVQ_DEPTH},
    {MRC_CTL_MAP_QPS, sizeof(mrc_ctl_qp_report), MRC_CTL_MAX_QPS},
    {MRC_CTL_MAP_EVSTAT, sizeof(mrc_ctl_evstat), MRC_CTL_MAX_EVSTATS},
};

size_t page_round(size_t n) {
  size_t pg = size_t(sysconf(_SC_PAGESIZE));
  return (n + pg - 1) / pg * pg;
}

}  // namespace

Status PinnedStore::map_all(Access access) {
  for (size_t i = 0; i < kMapCount; i++) {
    bpf_map_info info{};
    uint32_t len = sizeof(info);
    if (bpf_obj_get_info_by_fd(fds_[i].get(), &info, &len))
      return Error(errno, std::string("reading the info of ") + kMaps[i].name);
    if (info.value_size != kMaps[i].value_size || info.max_entries != kMaps[i].max_entries)
      return Error(EPROTO, dir_ + "/" + kMaps[i].name + " has " + std::to_string(info.max_entries) +
                               " entries of " + std::to_string(info.value_size) +
                               " bytes; this build expects " +
                               std::to_string(kMaps[i].max_entries) + " of " +
                               std::to_string(kMaps[i].value_size) +
                               " (stop mrcd and remove the pins, or run a matching build)");
  }
  const bool ro = access == Access::kReadMostly;
  for (size_t i = 0; i < kMmapable; i++) {
    // Mmapable array elements are laid out every round_up(value_size, 8) bytes.
    size_t stride = (kMaps[i].value_size + 7) / 8 * 8;
    size_t n = page_round(stride * kMaps[i].max_entries);
    // Applications add to the report counters of mrc_ctl_dev (evq_pushed,
    // evq_dropped): that record stays writable for them, the rest is read-only.
    const bool writable = !ro || i == 0;
    auto m = MmapArea::map(n, writable ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED,
                           fds_[i].get(), 0, kMaps[i].name);
    if (!m) return std::move(m).error();
    maps_[i] = std::move(*m);
  }
  r_.dev = static_cast<mrc_ctl_dev*>(maps_[0].get());
  r_.ports = {static_cast<mrc_ctl_port*>(maps_[1].get()), MRC_CTL_MAX_PORTS};
  r_.fmts = {static_cast<mrc_ctl_fmt*>(maps_[2].get()), MRC_CTL_MAX_FMT_PROFILES};
  r_.evps = {static_cast<mrc_ctl_evp*>(maps_[3].get()), MRC_CTL_MAX_EV_PROFILES};
  r_.evs = {static_cast<mrc_ctl_ev_entry*>(maps_[4].get()), MRC_CTL_EV_POOL};
  r_.ccs = {static_cast<mrc_ctl_cc*>(maps_[5].get()), MRC_CTL_MAX_CC_PROFILES};
  return ok_status();
}

Result<std::unique_ptr<PinnedStore>> PinnedStore::create_or_open(const std::string& dir,
                                                                 bool* found) {
  MRC_TRY(make_dirs(dir, 0755));
  std::unique_ptr<PinnedStore> st(new PinnedStore());
  st->dir_ = dir;
  struct stat sb;
  const bool had = ::stat((dir + "/" + MRC_CTL_MAP_DEV).c_str(), &sb) == 0;
  const char* names[kMapCount];
  for (size_t i = 0; i < kMapCount; i++) names[i] = kMaps[i].name;
  auto fds = loader::load_ctl_maps(dir, names);  // the pins and fds_ keep the maps
  if (!fds) return std::move(fds).error();
  for (size_t i = 0; i < kMapCount; i++) st->fds_[i] = std::move((*fds)[i]);
  MRC_TRY(st->map_all(Access::kReadWrite));
  if (found) *found = had;
  return st;
}

Result<std::unique_ptr<PinnedStore>> PinnedStore::open(const std::string& dir, Access access) {
  std::unique_ptr<PinnedStore> st(new PinnedStore());
  st->dir_ = dir;
  for (size_t i = 0; i < kMapCount; i++) {
    std::string path = dir + "/" + kMaps[i].name;
    st->fds_[i] = UniqueFd(bpf_obj_get(path.c_str()));
    if (!st->fds_[i]) {
      int e = errno;
      return Error(e, "opening " + path +
                          (e == ENOENT ? " (is mrcd running, with this pin directory?)" : ""));
    }
  }
  MRC_TRY(st->map_all(access));
  if (!st->initialised())
    return Error(EAGAIN, "the controller maps under " + dir + " are not initialised yet");
  if (st->dev().version != MRC_CTL_LAYOUT_VERSION)
    return Error(EPROTO, "controller layout version " + std::to_string(st->dev().version) +
                             " under " + dir + ", this build speaks " +
                             std::to_string(MRC_CTL_LAYOUT_VERSION));
  return st;
}

Status PinnedStore::unpin(const std::string& dir) {
  for (const MapDesc& m : kMaps) {
    std::string path = dir + "/" + m.name;
    if (::unlink(path.c_str()) && errno != ENOENT) return Error(errno, "unpinning " + path);
  }
  return ok_status();
}

Status PinnedStore::push_report(const mrc_ctl_ev_report& r) {
  if (bpf_map_update_elem(fds_[kEvq].get(), nullptr, &r, BPF_ANY)) {
    int e = errno;
    if (e == E2BIG || e == ENOSPC) return Error(E2BIG, "EV report queue is full");
    return Error(e, "pushing to mrc_ctl_evq");
  }
  return ok_status();
}

Result<size_t> PinnedStore::pop_reports(std::span<mrc_ctl_ev_report> out) {
  size_t n = 0;
  while (n < out.size()) {
    if (bpf_map_lookup_and_delete_elem(fds_[kEvq].get(), nullptr, &out[n])) {
      if (errno == ENOENT) break;
      return Error(errno, "popping from mrc_ctl_evq");
    }
    n++;
  }
  return n;
}

Status PinnedStore::put_qp(const mrc_ctl_qp_key& k, const mrc_ctl_qp_report& v) {
  if (bpf_map_update_elem(fds_[kQps].get(), &k, &v, BPF_ANY))
    return Error(errno, "updating mrc_ctl_qps");
  return ok_status();
}

Status PinnedStore::del_qp(const mrc_ctl_qp_key& k) {
  if (bpf_map_delete_elem(fds_[kQps].get(), &k)) return Error(errno, "deleting from mrc_ctl_qps");
  return ok_status();
}

template <class K, class V>
static Result<std::vector<std::pair<K, V>>> dump(int fd, const char* name) {
  std::vector<std::pair<K, V>> out;
  K key{}, next{};
  const K* cur = nullptr;
  for (;;) {
    if (bpf_map_get_next_key(fd, cur, &next)) {
      if (errno == ENOENT) break;
      return Error(errno, std::string("iterating ") + name);
    }
    V v{};
    if (bpf_map_lookup_elem(fd, &next, &v) == 0) out.push_back({next, v});
    key = next;
    cur = &key;
    if (out.size() > 1000000)
      return Error(ELOOP, std::string("iterating ") + name + ": too many entries");
  }
  return out;
}

Result<QpList> PinnedStore::list_qps() const {
  return dump<mrc_ctl_qp_key, mrc_ctl_qp_report>(fds_[kQps].get(), MRC_CTL_MAP_QPS);
}

Status PinnedStore::put_evstat(const mrc_ctl_evstat_key& k, const mrc_ctl_evstat& v) {
  if (bpf_map_update_elem(fds_[kEvStat].get(), &k, &v, BPF_ANY))
    return Error(errno, "updating mrc_ctl_evstat");
  return ok_status();
}

Status PinnedStore::del_evstat(const mrc_ctl_evstat_key& k) {
  if (bpf_map_delete_elem(fds_[kEvStat].get(), &k))
    return Error(errno, "deleting from mrc_ctl_evstat");
  return ok_status();
}

Result<EvStatList> PinnedStore::list_evstats() const {
  return dump<mrc_ctl_evstat_key, mrc_ctl_evstat>(fds_[kEvStat].get(), MRC_CTL_MAP_EVSTAT);
}

}  // namespace mrc::ctl
