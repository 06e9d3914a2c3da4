#include "loader/xdp_maps.hpp"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <cstring>
#include <vector>

#include "loader/log.hpp"

namespace mrc::loader {

const std::array<const char*, kStatsFields> kStatsFieldNames = {
    "rx_packets",       "rx_bytes",         "pass_non_mrc",   "redirect_data",   "redirect_ctrl",
    "redirect_trimmed", "tx_trim_nack",     "tx_ep_response", "ecn_ce",          "drop_truncated",
    "drop_bad_ip",      "drop_ip_fragment", "drop_bad_udp",   "drop_bad_bth",    "drop_bad_opcode",
    "drop_bad_length",  "drop_bad_qpn",     "drop_no_xsk",    "drop_admin_down", "drop_tx_error",
};

mrc_xdp_cfg default_xdp_cfg() {
  mrc_xdp_cfg c{};
  c.udp_port = MRC_UDP_PORT_DEFAULT;
  c.dscp_trimmed = MRC_DSCP_TRIMMED_DEFAULT;
  c.dscp_trimmed_lasthop = MRC_DSCP_TRIMMED_LASTHOP_DEFAULT;
  c.dscp_control = MRC_DSCP_CONTROL_DEFAULT;
  c.flags = 0;
  c.port_up_mask = 0;
  return c;
}

namespace {

Status update(int fd, const char* map, const void* key, const void* val, const std::string& what) {
  if (bpf_map_update_elem(fd, key, val, BPF_ANY))
    return Error(errno, std::string("updating ") + map + " (" + what + ")");
  return ok_status();
}

Status remove(int fd, const char* map, const void* key, const std::string& what) {
  if (bpf_map_delete_elem(fd, key))
    return Error(errno, std::string("deleting from ") + map + " (" + what + ")");
  return ok_status();
}

template <class T>
Result<T> lookup(int fd, const char* map, const void* key, const std::string& what) {
  T v{};
  if (bpf_map_lookup_elem(fd, key, &v))
    return Error(errno, std::string("looking up ") + map + " (" + what + ")");
  return v;
}

Status check_stats_port(uint32_t port) {
  if (port >= MRC_MAX_PORTS)
    return Error(EINVAL, "port " + std::to_string(port) + " is outside the stats map (max " +
                             std::to_string(MRC_MAX_PORTS - 1) + ")");
  return ok_status();
}

}  // namespace

Result<XdpMaps> XdpMaps::from_object(bpf_object* obj) {
  install_library_logging();
  XdpMaps m;
  UniqueFd* slots[] = {&m.xsks_, &m.cfg_, &m.ports_, &m.qps_, &m.stats_};
  for (size_t i = 0; i < kMapNames.size(); i++) {
    const bpf_map* map = bpf_object__find_map_by_name(obj, kMapNames[i]);
    if (!map) return Error(ENOENT, std::string("map ") + kMapNames[i] + " not in the object");
    int fd = bpf_map__fd(map);
    if (fd < 0) return Error(EBADF, std::string("map ") + kMapNames[i] + " is not loaded");
    auto d = UniqueFd::dup(fd, kMapNames[i]);
    if (!d) return std::move(d).error();
    *slots[i] = std::move(*d);
  }
  int n = libbpf_num_possible_cpus();
  if (n <= 0) return errno_error(n, "counting the possible CPUs");
  m.ncpus_ = n;
  return m;
}

Result<XdpMaps> XdpMaps::open_pinned(const std::string& dir) {
  install_library_logging();
  XdpMaps m;
  UniqueFd* slots[] = {&m.xsks_, &m.cfg_, &m.ports_, &m.qps_, &m.stats_};
  for (size_t i = 0; i < kMapNames.size(); i++) {
    std::string path = dir + "/" + kMapNames[i];
    int fd = bpf_obj_get(path.c_str());
    if (fd < 0) return Error(errno, "opening pinned map " + path);
    slots[i]->reset(fd);
  }
  int n = libbpf_num_possible_cpus();
  if (n <= 0) return errno_error(n, "counting the possible CPUs");
  m.ncpus_ = n;
  return m;
}

Status XdpMaps::set_cfg(const mrc_xdp_cfg& cfg) {
  uint32_t k = 0;
  return update(cfg_.get(), kMapCfg, &k, &cfg, "configuration");
}

Result<mrc_xdp_cfg> XdpMaps::cfg() const {
  uint32_t k = 0;
  return lookup<mrc_xdp_cfg>(cfg_.get(), kMapCfg, &k, "configuration");
}

Status XdpMaps::set_port(uint32_t ifindex, const mrc_port_info& info) {
  if (info.port == 0 || info.port >= MRC_MAX_PORTS)
    return Error(EINVAL, "port number " + std::to_string(info.port) + " for ifindex " +
                             std::to_string(ifindex) + " is not in 1.." +
                             std::to_string(MRC_MAX_PORTS - 1));
  return update(ports_.get(), kMapPorts, &ifindex, &info, "ifindex " + std::to_string(ifindex));
}

Status XdpMaps::del_port(uint32_t ifindex) {
  return remove(ports_.get(), kMapPorts, &ifindex, "ifindex " + std::to_string(ifindex));
}

Result<mrc_port_info> XdpMaps::port(uint32_t ifindex) const {
  return lookup<mrc_port_info>(ports_.get(), kMapPorts, &ifindex,
                               "ifindex " + std::to_string(ifindex));
}

Status XdpMaps::set_qp(uint32_t qpn, const mrc_qp_info& info) {
  if (qpn > MRC_QPN_MASK || info.remote_qpn > MRC_QPN_MASK)
    return Error(EINVAL, "QPN " + std::to_string(qpn) + " -> " + std::to_string(info.remote_qpn) +
                             " does not fit 24 bits");
  return update(qps_.get(), kMapQps, &qpn, &info, "QPN " + std::to_string(qpn));
}

Status XdpMaps::del_qp(uint32_t qpn) {
  return remove(qps_.get(), kMapQps, &qpn, "QPN " + std::to_string(qpn));
}

Result<mrc_qp_info> XdpMaps::qp(uint32_t qpn) const {
  return lookup<mrc_qp_info>(qps_.get(), kMapQps, &qpn, "QPN " + std::to_string(qpn));
}

Status XdpMaps::set_xsk(uint32_t port, uint32_t queue, int xsk_fd) {
  if (port >= MRC_MAX_PORTS || queue >= MRC_XSK_QUEUES_PER_PORT)
    return make_error(EINVAL, "port " + std::to_string(port) + " rx queue " +
                                  std::to_string(queue) + ": out of range of mrc_xsks (" +
                                  std::to_string(MRC_MAX_PORTS) + " ports x " +
                                  std::to_string(MRC_XSK_QUEUES_PER_PORT) + " queues)");
  uint32_t key = MRC_XSK_KEY(port, queue);
  uint32_t v = uint32_t(xsk_fd);
  return update(xsks_.get(), kMapXsks, &key, &v,
                "port " + std::to_string(port) + " rx queue " + std::to_string(queue));
}

Status XdpMaps::del_xsk(uint32_t port, uint32_t queue) {
  if (port >= MRC_MAX_PORTS || queue >= MRC_XSK_QUEUES_PER_PORT)
    return make_error(EINVAL, "port/queue out of range of mrc_xsks");
  uint32_t key = MRC_XSK_KEY(port, queue);
  return remove(xsks_.get(), kMapXsks, &key,
                "port " + std::to_string(port) + " rx queue " + std::to_string(queue));
}

Result<mrc_xdp_stats> XdpMaps::stats(uint32_t port) const {
  MRC_TRY(check_stats_port(port));
  std::vector<mrc_xdp_stats> per_cpu(static_cast<size_t>(ncpus_));
  if (bpf_map_lookup_elem(stats_.get(), &port, per_cpu.data()))
    return Error(errno, "reading " + std::string(kMapStats) + " of port " + std::to_string(port));
  mrc_xdp_stats sum{};
  auto* out = reinterpret_cast<uint64_t*>(&sum);
  for (const auto& c : per_cpu)
    for (size_t i = 0; i < kStatsFields; i++) out[i] += stats_field(c, i);
  return sum;
}

Result<std::array<mrc_xdp_stats, MRC_MAX_PORTS>> XdpMaps::all_stats() const {
  std::array<mrc_xdp_stats, MRC_MAX_PORTS> all{};
  for (uint32_t p = 0; p < MRC_MAX_PORTS; p++) {
    auto s = stats(p);
    if (!s) return std::move(s).error();
    all[p] = *s;
  }
  return all;
}

Status XdpMaps::reset_stats(uint32_t port) {
  MRC_TRY(check_stats_port(port));
  std::vector<mrc_xdp_stats> zero(static_cast<size_t>(ncpus_));
  std::memset(zero.data(), 0, zero.size() * sizeof(mrc_xdp_stats));
  return update(stats_.get(), kMapStats, &port, zero.data(), "port " + std::to_string(port));
}

}  // namespace mrc::loader
