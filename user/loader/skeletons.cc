// SkeletonOps<S> for the three BPF objects (skeleton.hpp): the generated
// static inline functions of their skeleton headers, given a name.
#include "loader/skeleton.hpp"
#include "mrc_ctl.skel.h"
#include "mrc_tx.skel.h"
#include "mrc_xdp.skel.h"

namespace mrc::loader {

#define MRC_LOADER_SKELETON_OPS_DEF(name)                              \
  ::name* SkeletonOps<::name>::open() { return name##__open(); }       \
  int SkeletonOps<::name>::load(::name* s) { return name##__load(s); } \
  void SkeletonOps<::name>::destroy(::name* s) { name##__destroy(s); }
MRC_LOADER_SKELETON_OPS_DEF(mrc_xdp)
MRC_LOADER_SKELETON_OPS_DEF(mrc_tx)
MRC_LOADER_SKELETON_OPS_DEF(mrc_ctl)
#undef MRC_LOADER_SKELETON_OPS_DEF

}  // namespace mrc::loader
