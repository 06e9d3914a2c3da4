// Attaching mrc_xdp to interfaces through libxdp, so it can share a NIC with
// other XDP programs when the kernel allows libxdp's dispatcher.
//
// Order of attempts per interface, each failure reported in AttachInfo:
//   1. libxdp, native (driver) mode;
//   2. if libxdp's dispatcher is refused (EPERM/EOPNOTSUPP: some kernels
//      reject its freplace links), the program alone through bpf_xdp_attach
//      in native mode;
//   3. if native mode is not possible and AttachOptions allows it, 1 and 2
//      again in generic (SKB) mode.
// The attachment object detaches on destruction unless keep() was called.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "loader/mrc_xdp.hpp"
#include "mrc/result.hpp"

struct xdp_program;

namespace mrc::loader {

enum class XdpMode : uint8_t { kNative, kGeneric };
std::string_view to_string(XdpMode m);

struct AttachOptions {
  bool allow_generic = true;  // fall back to generic (SKB) mode when native fails
  bool generic_only = false;  // skip native mode (e.g. for tests)
  bool keep = false;          // leave the program attached when the object goes away
};

struct AttachInfo {
  std::string ifname;
  int ifindex = 0;
  XdpMode mode = XdpMode::kNative;
  bool dispatcher = false;  // true: libxdp's multi-program dispatcher in front of mrc_xdp
  uint32_t prog_id = 0;     // program the interface runs (the dispatcher if there is one)
  std::string notes;        // every fallback taken and why ("" if none)
  std::string describe()
      const;  // "veth3: native, dispatcher" / "... generic, single program (...)"
};

class MrcXdpAttachment {
 public:
  MrcXdpAttachment(MrcXdpAttachment&&) noexcept;
  MrcXdpAttachment& operator=(MrcXdpAttachment&&) noexcept;
  ~MrcXdpAttachment();

  static Result<MrcXdpAttachment> attach(const MrcXdp& prog, const std::string& ifname,
                                         const AttachOptions& opts = {});

  const AttachInfo& info() const { return info_; }
  bool attached() const { return attached_; }
  // Leave the program on the interface when this object is destroyed.
  void keep(bool k = true) { keep_ = k; }
  Status detach();

 private:
  MrcXdpAttachment() = default;
  struct ProgDeleter {
    void operator()(xdp_program* p) const;
  };
  std::unique_ptr<xdp_program, ProgDeleter> xprog_;  // null when attached without libxdp
  int prog_fd_ = -1;                                 // mrc_xdp (not owned)
  AttachInfo info_;
  bool via_libxdp_ = false;
  bool attached_ = false;
  bool keep_ = false;
};

// Attaches to every interface in `ifnames`; on the first failure detaches the
// ones already done and returns the error.
Result<std::vector<MrcXdpAttachment>> attach_all(const MrcXdp& prog,
                                                 const std::vector<std::string>& ifnames,
                                                 const AttachOptions& opts = {});

// What runs on an interface now: true if any XDP program is attached (any
// mode); `prog_id` receives its id. For tests and diagnostics.
Result<bool> xdp_attached(const std::string& ifname, uint32_t* prog_id = nullptr);

}  // namespace mrc::loader
