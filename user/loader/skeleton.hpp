// Skeleton<S>: the one owner of a bpftool-generated libbpf skeleton
// (build/bpf/<name>.skel.h) for every BPF object of the tree: mrc_xdp,
// mrc_tx and mrc_ctl. Movable, not copyable; destroys the skeleton (and so
// its programs, maps and links not pinned elsewhere) on destruction.
//
// bpftool emits <name>__open/__load/__destroy as static inline functions of
// the generated header, so the template reaches them through SkeletonOps<S>,
// specialised below for each object and defined in skeletons.cc, the one
// file that includes the three generated headers' functions. Code that reads
// the skeleton's members (maps, progs, rodata) includes <name>.skel.h as well:
// only the loader does.
#pragma once

#include <cerrno>
#include <string>
#include <utility>

#include "mrc/result.hpp"

struct mrc_xdp;  // build/bpf/mrc_xdp.skel.h
struct mrc_tx;   // build/bpf/mrc_tx.skel.h
struct mrc_ctl;  // build/bpf/mrc_ctl.skel.h

namespace mrc::loader {

template <class S>
struct SkeletonOps;  // kName, open(), load(), destroy()

#define MRC_LOADER_SKELETON_OPS(name)           \
  template <>                                   \
  struct SkeletonOps<::name> {                  \
    static constexpr const char* kName = #name; \
    static ::name* open();                      \
    static int load(::name* s);                 \
    static void destroy(::name* s);             \
  }
MRC_LOADER_SKELETON_OPS(mrc_xdp);
MRC_LOADER_SKELETON_OPS(mrc_tx);
MRC_LOADER_SKELETON_OPS(mrc_ctl);
#undef MRC_LOADER_SKELETON_OPS

template <class S>
class Skeleton {
  using Ops = SkeletonOps<S>;

 public:
  Skeleton() = default;
  Skeleton(Skeleton&& o) noexcept : s_(std::exchange(o.s_, nullptr)) {}
  Skeleton& operator=(Skeleton&& o) noexcept {
    if (this != &o) {
      reset();
      s_ = std::exchange(o.s_, nullptr);
    }
    return *this;
  }
  Skeleton(const Skeleton&) = delete;
  Skeleton& operator=(const Skeleton&) = delete;
  ~Skeleton() { reset(); }

  // Opens the object embedded in the skeleton: nothing in the kernel yet.
  static Result<Skeleton> open() {
    S* s = Ops::open();
    if (!s)
      return Error(errno ? errno : EINVAL,
                   std::string("opening the ") + Ops::kName + " BPF object");
    return Skeleton(s);
  }
  // Loads programs and maps into the kernel (creating or reusing pinned maps
  // as their pin paths say). On failure the error says `what` failed.
  Status load(const std::string& what) {
    if (!s_) return Error(EINVAL, std::string(Ops::kName) + " is not open");
    const int err = Ops::load(s_);
    if (err) return errno_error(err, what);
    return ok_status();
  }

  S* get() const { return s_; }
  S* operator->() const { return s_; }
  explicit operator bool() const { return s_ != nullptr; }
  void reset() {
    if (s_) Ops::destroy(s_);
    s_ = nullptr;
  }

 private:
  explicit Skeleton(S* s) : s_(s) {}
  S* s_ = nullptr;
};

}  // namespace mrc::loader
