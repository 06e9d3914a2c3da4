// The Prometheus text format (Expo) and a small HTTP/1.1 server for it
// (Metrics): GET /metrics returns the text exposition `render()` produces;
// anything else is 404. One request per connection (Connection: close),
// non-blocking, driven by its owner's poll loop. Bind it to a local address
// (mrcd's default is 127.0.0.1:9477). Shared by mrcd and mrc-serviced.
#pragma once

#include <poll.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "mrc/result.hpp"
#include "util/unique_fd.hpp"

namespace mrc::prom {

// Builder of the Prometheus text format (HELP/TYPE once per family).
class Expo {
 public:
  void family(const std::string& name, const char* type, const std::string& help);
  void sample(const std::string& name,
              const std::vector<std::pair<std::string, std::string>>& labels, double v);
  template <class T>
  requires std::is_integral_v<T>
  void sample(const std::string& name,
              const std::vector<std::pair<std::string, std::string>>& labels, T v) {
    sample_u(name, labels, uint64_t(v));
  }
  const std::string& str() const { return s_; }

 private:
  void sample_u(const std::string& name, const std::vector<std::pair<std::string, std::string>>& l,
                uint64_t v);
  void labels(const std::vector<std::pair<std::string, std::string>>& l);
  std::string s_;
};

class Metrics {
 public:
  ~Metrics() = default;
  // `addr` is host:port ("127.0.0.1:9477", "[::1]:9477", ":9477" = all addresses).
  static Result<std::unique_ptr<Metrics>> listen(const std::string& addr,
                                                 std::function<std::string()> render);
  void fill_pollfds(std::vector<pollfd>* out) const;
  void handle(const pollfd& p);
  uint16_t port() const { return port_; }
  uint64_t scrapes() const { return scrapes_; }

 private:
  struct Conn {
    UniqueFd fd;
    std::string in, out;
    bool responded = false;
  };
  Metrics() = default;
  void respond(int fd, Conn& c);
  UniqueFd lfd_;
  uint16_t port_ = 0;
  std::function<std::string()> render_;
  std::map<int, Conn> conns_;  // by descriptor (Conn::fd)
  uint64_t scrapes_ = 0;
};

}  // namespace mrc::prom
