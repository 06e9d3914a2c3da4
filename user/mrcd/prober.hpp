// Endpoint operations on the wire for mrcd (ctl::EpTransport): requests are
// full MRC frames built with the codec and sent on an AF_PACKET socket bound
// to the plane interface of the EV's port; the next hop's MAC comes from the
// kernel's route and neighbour tables (resolution is triggered when missing).
// Responses carry MRC_EP_VI_CONTROLLER, which mrc_xdp passes to the stack
// (MRC_XDP_CFG_F_PASS_EP_RSP) instead of the applications' AF_XDP sockets;
// a classic BPF filter on the AF_PACKET socket keeps only ENDPOINT_RESPONSE
// frames. RTT = receive timestamp (SO_TIMESTAMPNS) - send time, less the
// responder's service time when the response carries it.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <vector>

#include "ctl/ep.hpp"
#include "mrcd/config.hpp"
#include "mrcd/dataplane.hpp"
#include "util/unique_fd.hpp"
#include "xdp/netlink.hpp"

namespace mrc::mrcd {

class Prober : public ctl::EpTransport {
 public:
  Prober(const Config& cfg, Dataplane& dp);
  ~Prober() override;
  Status open();

  Status send(const ctl::EpWire& w) override;
  Status receive(ctl::Time wait_ns, std::vector<ctl::EpArrival>* out) override;
  void cancel(std::span<const uint16_t> req_ids) override;

  // Event loop: descriptors to poll for input, and what to do when readable.
  std::vector<int> fds() const;
  void on_readable(int fd, std::vector<ctl::EpArrival>* out);
  // Sends requests whose neighbour resolved; gives up on those waiting too long.
  void tick(ctl::Time now);
  // When tick() should run next (a request waits for its neighbour).
  ctl::Time next_deadline() const;

  struct Counters {
    uint64_t tx = 0, tx_errors = 0, rx = 0, rx_parse_errors = 0, rx_unknown = 0;
    uint64_t neigh_waits = 0, neigh_failures = 0, sink_drained = 0;
  };
  const Counters& counters() const { return ctr_; }

 private:
  struct Sock {
    uint8_t port = 0;
    UniqueFd fd;
  };
  struct Waiting {
    ctl::EpWire w;
    ctl::Time since = 0;
    ctl::Time next_try = 0;
  };
  struct Sent {
    ctl::Time tx_real_ns = 0;
    uint8_t port = 0;
  };
  Status transmit(const ctl::EpWire& w, bool* waiting);
  bool read_one(int fd, uint8_t port, std::vector<ctl::EpArrival>* out);

  Config cfg_;
  Dataplane& dp_;
  std::vector<Sock> socks_;
  std::vector<UniqueFd>
      sinks_;  // UDP sockets on the MRC port: no ICMP unreachable for passed responses
  xdp::netlink::Socket nl_;  // rtnetlink: routes and neighbours
  std::deque<Waiting> waiting_;
  std::map<uint16_t, Sent> sent_;
  Counters ctr_;
};

}  // namespace mrc::mrcd
