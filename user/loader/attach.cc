#include "loader/attach.hpp"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/if_link.h>
#include <net/if.h>
#include <xdp/libxdp.h>

#include <cstring>
#include <utility>

#include "loader/log.hpp"

namespace mrc::loader {
namespace {

enum xdp_attach_mode libxdp_mode(XdpMode m) {
  return m == XdpMode::kNative ? XDP_MODE_NATIVE : XDP_MODE_SKB;
}

uint32_t libbpf_flags(XdpMode m) {
  return m == XdpMode::kNative ? XDP_FLAGS_DRV_MODE : XDP_FLAGS_SKB_MODE;
}

std::string err_str(int neg) { return std::strerror(neg < 0 ? -neg : neg); }

}  // namespace

std::string_view to_string(XdpMode m) { return m == XdpMode::kNative ? "native" : "generic"; }

std::string AttachInfo::describe() const {
  std::string s = ifname + ": " + std::string(to_string(mode)) + ", " +
                  (dispatcher ? "libxdp dispatcher" : "single program");
  if (!notes.empty()) s += " (" + notes + ")";
  return s;
}

void MrcXdpAttachment::ProgDeleter::operator()(xdp_program* p) const { xdp_program__close(p); }

MrcXdpAttachment::MrcXdpAttachment(MrcXdpAttachment&& o) noexcept
    : xprog_(std::move(o.xprog_)),
      prog_fd_(o.prog_fd_),
      info_(std::move(o.info_)),
      via_libxdp_(o.via_libxdp_),
      attached_(std::exchange(o.attached_, false)),
      keep_(o.keep_) {}

MrcXdpAttachment& MrcXdpAttachment::operator=(MrcXdpAttachment&& o) noexcept {
  if (this != &o) {
    if (attached_ && !keep_) {
      Status s = detach();
      if (!s) log(LogLevel::kWarn, "%s", s.error().message().c_str());
    }
    xprog_ = std::move(o.xprog_);
    prog_fd_ = o.prog_fd_;
    info_ = std::move(o.info_);
    via_libxdp_ = o.via_libxdp_;
    attached_ = std::exchange(o.attached_, false);
    keep_ = o.keep_;
  }
  return *this;
}

MrcXdpAttachment::~MrcXdpAttachment() {
  if (attached_ && !keep_) {
    Status s = detach();
    if (!s) log(LogLevel::kWarn, "%s", s.error().message().c_str());
  }
}

Result<MrcXdpAttachment> MrcXdpAttachment::attach(const MrcXdp& prog, const std::string& ifname,
                                                  const AttachOptions& opts) {
  install_library_logging();
  const std::string ctx = "attaching mrc_xdp to " + ifname;
  if (!prog.loaded()) return Error(EINVAL, ctx + ": the program is not loaded");
  unsigned idx = if_nametoindex(ifname.c_str());
  if (!idx) return Error(errno, ctx + ": no such interface");

  MrcXdpAttachment a;
  a.prog_fd_ = prog.prog_fd();
  a.keep_ = opts.keep;
  a.info_.ifname = ifname;
  a.info_.ifindex = int(idx);

  std::vector<XdpMode> modes;
  if (!opts.generic_only) modes.push_back(XdpMode::kNative);
  if (opts.generic_only || opts.allow_generic) modes.push_back(XdpMode::kGeneric);

  std::string notes;
  int last = -EINVAL;
  for (XdpMode mode : modes) {
    // 1. through libxdp (dispatcher when the kernel allows it)
    // The program's own section ("xdp.frags": it accepts multi-buffer frames,
    // which native XDP on jumbo-MTU interfaces such as veth requires).
    bpf_program* bp = bpf_object__next_program(prog.object(), nullptr);
    const char* sec = bp ? bpf_program__section_name(bp) : "xdp";
    xdp_program* xp = xdp_program__from_bpf_obj(prog.object(), sec);
    long perr = libxdp_get_error(xp);
    if (perr) return errno_error(int(perr), ctx + ": creating the libxdp program");
    std::unique_ptr<xdp_program, ProgDeleter> owned(xp);
    int err;
    {
      // libxdp's dispatcher probe failing is expected on some kernels; the
      // outcome is reported in AttachInfo (and as an error if all fails)
      ScopedDemoteLibraryWarnings demote;
      err = xdp_program__attach(xp, int(idx), libxdp_mode(mode), 0);
    }
    if (!err) {
      a.xprog_ = std::move(owned);
      a.via_libxdp_ = true;
      a.attached_ = true;
      xdp_multiprog* mp = xdp_multiprog__get_from_ifindex(int(idx));
      if (!libxdp_get_error(mp) && mp) {
        a.info_.dispatcher = !xdp_multiprog__is_legacy(mp);
        a.info_.mode =
            xdp_multiprog__attach_mode(mp) == XDP_MODE_SKB ? XdpMode::kGeneric : XdpMode::kNative;
        a.info_.prog_id = xdp_program__id(xdp_multiprog__main_prog(mp));
        xdp_multiprog__close(mp);
      } else {
        a.info_.mode = mode;
      }
      if (!a.info_.dispatcher)
        notes +=
            std::string(notes.empty() ? "" : "; ") + "libxdp attached it without its dispatcher";
      a.info_.notes = notes;
      log(LogLevel::kInfo, "%s", a.info_.describe().c_str());
      return a;
    }
    notes += std::string(notes.empty() ? "" : "; ") + "libxdp " + std::string(to_string(mode)) +
             ": " + err_str(err);
    last = err;

    // 2. dispatcher refused: the program alone through the netlink API.
    // EPERM/EOPNOTSUPP: the kernel rejects the dispatcher's freplace link
    // (6.18); EINVAL: libxdp 1.3.1 cannot set the dispatcher as the attach
    // target of an object that is already loaded (6.1).
    if (err == -EPERM || err == -EOPNOTSUPP || err == -EINVAL) {
      LIBBPF_OPTS(bpf_xdp_attach_opts, aopts);
      err = bpf_xdp_attach(int(idx), a.prog_fd_, libbpf_flags(mode) | XDP_FLAGS_UPDATE_IF_NOEXIST,
                           &aopts);
      if (!err) {
        a.attached_ = true;
        a.info_.mode = mode;
        a.info_.dispatcher = false;
        bpf_prog_info pinfo{};
        uint32_t len = sizeof(pinfo);
        if (!bpf_obj_get_info_by_fd(a.prog_fd_, &pinfo, &len)) a.info_.prog_id = pinfo.id;
        notes += "; attached as a single program without libxdp";
        a.info_.notes = notes;
        log(LogLevel::kInfo, "%s", a.info_.describe().c_str());
        return a;
      }
      notes += "; single program " + std::string(to_string(mode)) + ": " + err_str(err);
      last = err;
    }
    // Another program is there: a different mode would not help.
    if (last == -EEXIST || last == -EBUSY) break;
  }
  return errno_error(last, ctx + ": " + notes);
}

Status MrcXdpAttachment::detach() {
  if (!attached_) return ok_status();
  const std::string ctx = "detaching mrc_xdp from " + info_.ifname;
  int err;
  if (via_libxdp_) {
    err = xdp_program__detach(xprog_.get(), info_.ifindex, libxdp_mode(info_.mode), 0);
  } else {
    LIBBPF_OPTS(bpf_xdp_attach_opts, dopts, .old_prog_fd = prog_fd_);
    err = bpf_xdp_detach(info_.ifindex, libbpf_flags(info_.mode) | XDP_FLAGS_REPLACE, &dopts);
  }
  attached_ = false;
  xprog_.reset();
  if (err) return errno_error(err, ctx);
  return ok_status();
}

Result<std::vector<MrcXdpAttachment>> attach_all(const MrcXdp& prog,
                                                 const std::vector<std::string>& ifnames,
                                                 const AttachOptions& opts) {
  std::vector<MrcXdpAttachment> out;
  out.reserve(ifnames.size());
  for (const auto& n : ifnames) {
    auto a = MrcXdpAttachment::attach(prog, n, opts);
    if (!a) {
      for (auto& done : out) done.keep(false);
      return std::move(a).error();  // `out` detaches what was attached
    }
    out.push_back(std::move(*a));
  }
  return out;
}

Result<bool> xdp_attached(const std::string& ifname, uint32_t* prog_id) {
  unsigned idx = if_nametoindex(ifname.c_str());
  if (!idx) return Error(errno, "querying XDP on " + ifname + ": no such interface");
  LIBBPF_OPTS(bpf_xdp_query_opts, q);
  int err = bpf_xdp_query(int(idx), 0, &q);
  if (err) return errno_error(err, "querying XDP on " + ifname);
  uint32_t id = q.prog_id ? q.prog_id : q.drv_prog_id ? q.drv_prog_id : q.skb_prog_id;
  if (prog_id) *prog_id = id;
  return id != 0 || q.attach_mode != XDP_ATTACHED_NONE;
}

}  // namespace mrc::loader
