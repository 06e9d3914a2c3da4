#include "mrcd/dataplane.hpp"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <ifaddrs.h>
#include <linux/if_link.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>
#include <xdp/libxdp.h>

#include <cstring>

#include "mrcd/log.hpp"

namespace mrc::mrcd {

namespace {

constexpr const char* kProgName = "mrc_xdp_rx";

// The mrc_xdp program attached to an interface, if any.
struct Found {
  uint32_t prog_id = 0;
  bool dispatcher = false;
  loader::XdpMode mode = loader::XdpMode::kNative;
  bool ours = false;       // named mrc_xdp_rx
  bool same_maps = false;  // uses the map `cfg_map_id`
  bool other = false;      // some other XDP program is attached
};

std::string prog_name(uint32_t id, std::vector<uint32_t>* map_ids) {
  UniqueFd prog(bpf_prog_get_fd_by_id(id));
  if (!prog) return "";
  const int fd = prog.get();
  bpf_prog_info info{};
  uint32_t len = sizeof(info);
  std::vector<uint32_t> ids(64);
  info.nr_map_ids = uint32_t(ids.size());
  info.map_ids = uint64_t(uintptr_t(ids.data()));
  std::string name;
  if (bpf_obj_get_info_by_fd(fd, &info, &len) == 0) {
    name = info.name;
    ids.resize(std::min<uint32_t>(info.nr_map_ids, 64));
    if (map_ids) *map_ids = ids;
  }
  return name;
}

uint32_t map_id(int fd) {
  bpf_map_info info{};
  uint32_t len = sizeof(info);
  if (bpf_obj_get_info_by_fd(fd, &info, &len)) return 0;
  return info.id;
}

Found find_mrc_xdp(uint32_t ifindex, uint32_t cfg_map_id) {
  Found f;
  LIBBPF_OPTS(bpf_xdp_query_opts, q);
  if (bpf_xdp_query(int(ifindex), 0, &q)) return f;
  uint32_t id = q.prog_id ? q.prog_id : q.drv_prog_id ? q.drv_prog_id : q.skb_prog_id;
  if (!id) return f;
  f.mode = q.attach_mode == XDP_ATTACHED_SKB ? loader::XdpMode::kGeneric : loader::XdpMode::kNative;
  std::vector<uint32_t> maps;
  std::string name = prog_name(id, &maps);
  if (name == kProgName) {
    f.prog_id = id;
    f.ours = true;
  } else {
    // libxdp's dispatcher: look at the programs behind it.
    xdp_multiprog* mp = xdp_multiprog__get_from_ifindex(int(ifindex));
    if (!libxdp_get_error(mp) && mp && !xdp_multiprog__is_legacy(mp)) {
      for (xdp_program* p = xdp_multiprog__next_prog(nullptr, mp); p;
           p = xdp_multiprog__next_prog(p, mp)) {
        if (std::strcmp(xdp_program__name(p), kProgName) == 0) {
          f.prog_id = xdp_program__id(p);
          f.ours = true;
          f.dispatcher = true;
          name = prog_name(f.prog_id, &maps);
        }
      }
    }
    if (mp && !libxdp_get_error(mp)) xdp_multiprog__close(mp);
    if (!f.ours) {
      f.other = true;
      return f;
    }
  }
  for (uint32_t m : maps) f.same_maps |= m == cfg_map_id;
  return f;
}

Status detach_found(uint32_t ifindex, const Found& f) {
  if (f.dispatcher) {
    xdp_program* p = xdp_program__from_id(f.prog_id);
    if (libxdp_get_error(p)) return Error(EINVAL, "opening program " + std::to_string(f.prog_id));
    int err = xdp_program__detach(
        p, int(ifindex), f.mode == loader::XdpMode::kGeneric ? XDP_MODE_SKB : XDP_MODE_NATIVE, 0);
    xdp_program__close(p);
    if (err) return errno_error(err, "detaching the old mrc_xdp");
    return ok_status();
  }
  int err = bpf_xdp_detach(
      int(ifindex), f.mode == loader::XdpMode::kGeneric ? XDP_FLAGS_SKB_MODE : XDP_FLAGS_DRV_MODE,
      nullptr);
  if (err) return errno_error(err, "detaching the old mrc_xdp");
  return ok_status();
}

}  // namespace

Dataplane::~Dataplane() = default;

Plane* Dataplane::plane_by_port(uint8_t port) {
  for (Plane& p : planes_)
    if (p.cfg.port == port) return &p;
  return nullptr;
}

Status Dataplane::write_cfg() {
  mrc_xdp_cfg c = loader::default_xdp_cfg();
  c.udp_port = cfg_.udp_port;
  c.dscp_trimmed = cfg_.dscp.trimmed;
  c.dscp_trimmed_lasthop = cfg_.dscp.trimmed_lasthop;
  c.dscp_control = cfg_.dscp.control;
  c.flags = MRC_XDP_CFG_F_PASS_EP_RSP;
  if (!cfg_.xdp_trim_nack) c.flags |= MRC_XDP_CFG_F_NO_TRIM_NACK;
  if (!cfg_.xdp_ep_probe) c.flags |= MRC_XDP_CFG_F_NO_EP_PROBE;
  uint16_t up = 0;
  for (const Plane& p : planes_)
    if (p.link_up && p.admin_up && p.cfg.port <= 16) up |= uint16_t(1u << (p.cfg.port - 1));
  c.port_up_mask = up;
  return xdp_->maps().set_cfg(c);
}

Status Dataplane::attach_plane(Plane& p) {
  const uint32_t cfg_id = map_id(xdp_->maps().cfg_fd());
  Found f = find_mrc_xdp(p.ifindex, cfg_id);
  if (f.ours && f.same_maps && !cfg_.reload_xdp) {
    p.kept = true;
    p.mode = f.mode;
    p.attach_notes =
        "kept the mrc_xdp attached by an earlier mrcd (program " + std::to_string(f.prog_id) + ")";
    MRCD_INFO("%s: %s, %s", p.cfg.ifname.c_str(), std::string(loader::to_string(p.mode)).c_str(),
              p.attach_notes.c_str());
    return ok_status();
  }
  if (f.ours) {
    MRCD_INFO("%s: replacing mrc_xdp program %u (%s)", p.cfg.ifname.c_str(), f.prog_id,
              f.same_maps ? "--reload-xdp" : "it uses other maps than the pinned ones");
    MRC_TRY(detach_found(p.ifindex, f));
  } else if (f.other) {
    MRCD_WARN(
        "%s: another XDP program is attached; trying libxdp's dispatcher to share the interface",
        p.cfg.ifname.c_str());
  }
  loader::AttachOptions o;
  o.allow_generic = cfg_.xdp_mode == "auto";
  o.generic_only = cfg_.xdp_mode == "generic";
  o.keep = true;
  auto a = loader::MrcXdpAttachment::attach(*xdp_, p.cfg.ifname, o);
  if (!a) return std::move(a).error();
  p.mode = a->info().mode;
  p.attach_notes = a->info().describe();
  if (p.mode == loader::XdpMode::kGeneric && cfg_.xdp_mode == "auto")
    MRCD_WARN("%s: running in generic (SKB) mode: %s", p.cfg.ifname.c_str(),
              a->info().notes.c_str());
  p.att = std::move(*a);
  return ok_status();
}

Result<std::unique_ptr<Dataplane>> Dataplane::start(const Config& c,
                                                    const std::function<bool(uint8_t)>& admin_up) {
  std::unique_ptr<Dataplane> d(new Dataplane());
  d->cfg_ = c;
  d->ioctl_fd_ = UniqueFd(socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!d->ioctl_fd_) return Error(errno, "opening an ioctl socket");
  for (const PlaneCfg& pc : c.planes) {
    Plane p;
    p.cfg = pc;
    p.ifindex = if_nametoindex(pc.ifname.c_str());
    if (!p.ifindex)
      return Error(ENODEV, "plane " + pc.ifname + " (port " + std::to_string(pc.port) +
                               "): no such interface");
    p.admin_up = admin_up(pc.port);
    d->planes_.push_back(std::move(p));
  }
  d->refresh_links([](uint8_t, bool) {});
  for (Plane& p : d->planes_) {
    ifreq ifr{};
    std::strncpy(ifr.ifr_name, p.cfg.ifname.c_str(), IFNAMSIZ - 1);
    if (ioctl(d->ioctl_fd_.get(), SIOCGIFHWADDR, &ifr) == 0)
      std::memcpy(p.mac.data(), ifr.ifr_hwaddr.sa_data, 6);
  }
  auto x = loader::MrcXdp::open();
  if (!x) return std::move(x).error();
  d->xdp_ = std::move(*x);
  MRC_TRY(d->xdp_->set_pin_dir(c.pin_dir));
  MRC_TRY(d->xdp_->load());
  MRC_TRY(d->write_cfg());
  for (Plane& p : d->planes_) {
    mrc_port_info info{p.cfg.port, p.admin_up ? 0u : uint32_t(MRC_PORT_F_ADMIN_DOWN)};
    MRC_TRY(d->maps().set_port(p.ifindex, info));
  }
  // Entries of interfaces no longer configured.
  {
    int fd = d->maps().ports_fd();
    uint32_t key = 0, next = 0;
    std::vector<uint32_t> stale;
    const uint32_t* cur = nullptr;
    while (bpf_map_get_next_key(fd, cur, &next) == 0) {
      bool known = false;
      for (const Plane& p : d->planes_) known |= p.ifindex == next;
      if (!known) stale.push_back(next);
      key = next;
      cur = &key;
    }
    for (uint32_t k : stale) (void)d->maps().del_port(k);
  }
  for (Plane& p : d->planes_) {
    Status s = d->attach_plane(p);
    if (!s) return Error(s.error().code, "plane " + p.cfg.ifname + ": " + s.error().context);
  }
  MRC_TRY(d->xdp_->pin_maps(c.pin_dir));
  return d;
}

Status Dataplane::set_admin(uint8_t port, bool up) {
  Plane* p = plane_by_port(port);
  if (!p) return Error(EINVAL, "port " + std::to_string(port) + " has no plane interface");
  p->admin_up = up;
  MRC_TRY(maps().set_port(p->ifindex, {port, up ? 0u : uint32_t(MRC_PORT_F_ADMIN_DOWN)}));
  return write_cfg();
}

void Dataplane::refresh_links(const std::function<void(uint8_t, bool)>& changed) {
  bool any = false;
  for (Plane& p : planes_) {
    ifreq ifr{};
    std::strncpy(ifr.ifr_name, p.cfg.ifname.c_str(), IFNAMSIZ - 1);
    bool up = false;
    if (ioctl(ioctl_fd_.get(), SIOCGIFFLAGS, &ifr) == 0)
      up = (ifr.ifr_flags & IFF_UP) && (ifr.ifr_flags & IFF_RUNNING);
    if (up != p.link_up) {
      p.link_up = up;
      any = true;
      changed(p.cfg.port, up);
    }
  }
  if (any && xdp_) {
    Status s = write_cfg();
    if (!s) MRCD_WARN("updating mrc_cfg: %s", s.error().message().c_str());
  }
}

std::vector<codec::IpAddr> Dataplane::addresses(const Plane& p) const {
  std::vector<codec::IpAddr> v4, v6g, v6l;
  ifaddrs* ifa = nullptr;
  if (getifaddrs(&ifa)) return {};
  for (ifaddrs* i = ifa; i; i = i->ifa_next) {
    if (!i->ifa_addr || !i->ifa_name || p.cfg.ifname != i->ifa_name) continue;
    codec::IpAddr ip;
    if (i->ifa_addr->sa_family == AF_INET) {
      ip.ver = codec::IpVersion::kV4;
      std::memcpy(ip.b.data(), &reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr, 4);
      v4.push_back(ip);
    } else if (i->ifa_addr->sa_family == AF_INET6) {
      ip.ver = codec::IpVersion::kV6;
      std::memcpy(ip.b.data(), &reinterpret_cast<sockaddr_in6*>(i->ifa_addr)->sin6_addr, 16);
      (ip.b[0] == 0xfe && (ip.b[1] & 0xc0) == 0x80 ? v6l : v6g).push_back(ip);
    }
  }
  freeifaddrs(ifa);
  v4.insert(v4.end(), v6g.begin(), v6g.end());
  v4.insert(v4.end(), v6l.begin(), v6l.end());
  return v4;
}

Status Dataplane::stop(bool keep) {
  if (keep) {
    for (Plane& p : planes_)
      if (p.att) p.att->keep(true);
    return ok_status();
  }
  Status first = ok_status();
  for (Plane& p : planes_) {
    Status s = ok_status();
    if (p.att) {
      s = p.att->detach();
    } else if (p.kept) {
      Found f = find_mrc_xdp(p.ifindex, map_id(xdp_->maps().cfg_fd()));
      if (f.ours) s = detach_found(p.ifindex, f);
    }
    if (!s && first.ok()) first = Error(s.error().code, p.cfg.ifname + ": " + s.error().context);
  }
  if (xdp_) {
    Status s = xdp_->unpin_maps(cfg_.pin_dir);
    if (!s && first.ok()) first = s;
  }
  return first;
}

}  // namespace mrc::mrcd
