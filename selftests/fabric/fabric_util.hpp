// Small helpers shared by the fabric tools: an owned fd, a scoped switch of
// the calling thread into a network namespace, and the fabric state file.
#pragma once

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "mrc/result.hpp"
#include "util/unique_fd.hpp"

namespace mrc::fabric {

using mrc::UniqueFd;

// Moves the calling thread into a named network namespace (/run/netns/NAME)
// and back on destruction. Only the network namespace changes: the mount
// namespace (and so bpffs) stays the caller's.
class NetnsScope {
 public:
  static Result<NetnsScope> enter(const std::string& ns) {
    NetnsScope s;
    s.orig_ = UniqueFd(::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC));
    if (!s.orig_.valid()) return make_error(errno, "opening the current network namespace");
    if (ns.empty()) return s;
    UniqueFd target(::open(("/run/netns/" + ns).c_str(), O_RDONLY | O_CLOEXEC));
    if (!target.valid()) return make_error(errno, "opening network namespace " + ns);
    if (::setns(target.get(), CLONE_NEWNET) != 0)
      return make_error(errno, "entering network namespace " + ns);
    s.entered_ = true;
    return s;
  }
  NetnsScope(NetnsScope&& o) noexcept
      : orig_(std::move(o.orig_)), entered_(std::exchange(o.entered_, false)) {}
  NetnsScope& operator=(NetnsScope&&) = delete;
  NetnsScope(const NetnsScope&) = delete;
  NetnsScope& operator=(const NetnsScope&) = delete;
  ~NetnsScope() {
    if (entered_ && orig_.valid()) (void)::setns(orig_.get(), CLONE_NEWNET);
  }

 private:
  NetnsScope() = default;
  UniqueFd orig_;
  bool entered_ = false;
};

struct LinkEnd {
  std::string node, ns, ifname, mac, ipv4, ipv6;
};
// Where faults on one direction of a link attach (state file "fault").
struct FaultPoint {
  std::string ns, ifname, hook;
};
struct Link {
  std::string name;
  int plane = 0;
  LinkEnd a, b;
  FaultPoint fwd, rev;  // a->b and b->a
};
struct State {
  std::string run, topology, bpffs, dir;
  int planes = 0;
  std::vector<Link> links;
  std::map<std::string, std::string> node_ns;  // node -> namespace
  nlohmann::json raw;
};

inline Result<State> load_state(const std::string& path) {
  std::ifstream in(path);
  if (!in) return make_error(ENOENT, "reading fabric state " + path);
  State s;
  s.raw = nlohmann::json::parse(in, nullptr, false);
  if (s.raw.is_discarded() || !s.raw.is_object())
    return make_error(EINVAL, path + " is not a fabric state file");
  auto str = [](const nlohmann::json& j, const char* k) {
    return j.contains(k) && j[k].is_string() ? j[k].get<std::string>() : std::string();
  };
  try {
    s.run = str(s.raw, "run");
    s.topology = str(s.raw, "topology");
    s.bpffs = str(s.raw, "bpffs");
    s.dir = str(s.raw, "dir");
    s.planes = s.raw.value("planes", 0);
    for (const auto& n : s.raw.value("namespaces", nlohmann::json::array()))
      s.node_ns[str(n, "node")] = str(n, "ns");
    for (const auto& l : s.raw.value("links", nlohmann::json::array())) {
      Link k;
      k.name = str(l, "name");
      k.plane = l.value("plane", 0);
      for (auto [key, end] : {std::pair{"a", &k.a}, std::pair{"b", &k.b}}) {
        const nlohmann::json e = l.value(key, nlohmann::json::object());
        *end = LinkEnd{str(e, "node"), str(e, "ns"),   str(e, "ifname"),
                       str(e, "mac"),  str(e, "ipv4"), str(e, "ipv6")};
      }
      if (l.contains("fault") && l["fault"].is_object()) {
        for (auto [key, fp] : {std::pair{"fwd", &k.fwd}, std::pair{"rev", &k.rev}}) {
          const nlohmann::json f = l["fault"].value(key, nlohmann::json::object());
          *fp = FaultPoint{str(f, "ns"), str(f, "ifname"), str(f, "hook")};
        }
      }
      s.links.push_back(std::move(k));
    }
  } catch (const nlohmann::json::exception& e) {  // a field of the wrong type
    return make_error(EINVAL, path + ": " + e.what());
  }
  if (s.run.empty() || s.links.empty()) return make_error(EINVAL, path + " has no run or links");
  return s;
}

// Shell-style glob (* and ?) match, enough for link names.
inline bool glob_match(const char* p, const char* s) {
  for (; *p; p++, s++) {
    if (*p == '*') {
      for (;; s++) {
        if (glob_match(p + 1, s)) return true;
        if (!*s) return false;
      }
    }
    if (!*s || (*p != '?' && *p != *s)) return false;
  }
  return !*s;
}

}  // namespace mrc::fabric
