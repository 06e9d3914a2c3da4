// mrcd: the MRC controller daemon. Documentation/controller.md.
//
// main() parses the arguments and the configuration and runs the Daemon
// (mrcd/daemon.hpp).
#include <cstdio>

#include "mrcd/config.hpp"
#include "mrcd/daemon.hpp"
#include "mrcd/log.hpp"

int main(int argc, char** argv) {
  using namespace mrc::mrcd;
  auto o = parse_args(argc, argv);
  if (!o) {
    std::fprintf(stderr, "mrcd: %s\n", o.error().message().c_str());
    return 2;
  }
  if (o->help) {
    std::fputs(usage().c_str(), stdout);
    return 0;
  }
  if (o->version) {
    std::printf("mrcd %s (controller layout %d)\n", MRC_VERSION, MRC_CTL_LAYOUT_VERSION);
    return 0;
  }
  if (mrc::Status s = validate(o->cfg); !s) {
    std::fprintf(stderr, "mrcd: %s%s\n", o->cfg.path.empty() ? "" : (o->cfg.path + ": ").c_str(),
                 s.error().context.c_str());
    return 2;
  }
  if (o->check_only) {
    std::printf("mrcd: configuration ok (%zu planes)\n", o->cfg.planes.size());
    return 0;
  }
  set_log_level(o->cfg.log_level);
  Daemon d(o->cfg);
  if (mrc::Status s = d.start(); !s) {
    MRCD_ERROR("%s", s.error().message().c_str());
    return 1;
  }
  return d.run();
}
