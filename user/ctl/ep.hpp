// Endpoint operations (mrc_ctl_ep_batch_send_wait): EV probes and port
// status updates sent as ENDPOINT_REQUEST packets to QPN 2 and matched with
// the ENDPOINT_RESPONSE by req_id and source address.
//
//  - req_id must be unique across outstanding requests: a duplicate inside a
//    batch or with a request still outstanding (including unanswered requests
//    of a finished batch during the drain window) is EINVAL;
//  - responses are returned in arrival order with the RTT in ns (adjusted for
//    the responder's service time when the response carries it);
//  - a batch whose responses are not all in by the timeout completes with
//    ETIMEDOUT and the responses that did arrive (partial results).
//
// EpBatcher holds that logic and is driven by an event loop (mrcd) or
// through send_wait(). The EpTransport puts requests on the wire and measures
// RTTs (mrcd: AF_PACKET per plane, mrcd/prober.hpp; tests: a fake).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "codec/packet.hpp"
#include "ctl/types.hpp"
#include "mrc/result.hpp"
#include "util/clock.hpp"

namespace mrc::ctl {

using Time = uint64_t;  // ns, CLOCK_MONOTONIC
using mrc::mono_ns;     // util/clock.hpp

// One request as the transport sends it.
struct EpWire {
  uint16_t req_id = 0;
  uint8_t op = MRC_EP_OP_EV_PROBE;  // wire op (enum mrc_ep_op)
  uint8_t port = 0;                 // local plane port
  uint8_t dscp = 0;                 // 0 = control class
  uint32_t entropy = 0;             // 32-bit wire EV
  uint32_t fmt_mode = kFmtStev;
  codec::IpAddr src;  // all zero: the port's address
  bool src_set = false;
  codec::IpAddr dst;
  uint32_t port_status = 0;
  // SRv6: the request leaves with this uSID container as its destination
  // (`dst` is where it ends, after the last shift: the ICRC covers it).
  bool srv6 = false;
  std::array<uint8_t, 16> sid{};
};

// A response as the transport saw it.
struct EpArrival {
  uint16_t req_id = 0;
  uint8_t port = 0;  // local port it arrived on
  uint32_t rtt_ns = 0;
  bool adj_svc_time = false;
  codec::IpAddr from;
  uint32_t port_status = 0;  // responder's port-up mask
  uint8_t rx_port = 0;       // responder's port
};

class EpTransport {
 public:
  virtual ~EpTransport() = default;
  // Sends (or queues, e.g. until the neighbour resolves) one request.
  virtual Status send(const EpWire& w) = 0;
  // Blocks up to `wait_ns` for responses (send_wait only; an event loop
  // feeds EpBatcher::on_response itself).
  virtual Status receive(Time wait_ns, std::vector<EpArrival>* out) = 0;
  // Drops queued, not yet sent requests of these ids (batch finished).
  virtual void cancel(std::span<const uint16_t> req_ids) { (void)req_ids; }
};

struct EpLimits {
  uint32_t max_batch = 256;
  Time drain_ns = 1'000'000'000;  // unanswered ids stay reserved this long
  Time max_timeout_ns = 60'000'000'000ull;
};

struct EpBatchDone {
  uint64_t id = 0;
  std::vector<EpRsp> rsps;        // arrival order
  std::vector<EpArrival> detail;  // same order, what the transport saw
  int err = 0;                    // 0 or ETIMEDOUT
  uint32_t num_req = 0;
};

class EpBatcher {
 public:
  // `check_port(port)` validates the local port of a request (configured,
  // administratively enabled); returns an error otherwise.
  using PortCheck = std::function<Status(uint8_t port)>;
  EpBatcher(EpTransport& t, EpLimits lim, PortCheck check);

  // Validates a batch (EINVAL/ENOTSUP/...), sends it and returns its id.
  Result<uint64_t> start(uint8_t req_tc, uint32_t op_type, std::span<const EpReq> reqs,
                         uint32_t rsp_timeout_ns, Time now);
  // A response arrived (matched by req_id and source; others are counted).
  void on_response(const EpArrival& a, Time now);
  // Batches that completed (all answered) or timed out by `now`.
  std::vector<EpBatchDone> poll(Time now);
  // Earliest batch deadline (or ~0).
  Time next_deadline() const;

  // Blocking form (mrc_ctl_ep_batch_send_wait): responses in `rsp`, ETIMEDOUT
  // with the partial results when not all arrived.
  Status send_wait(uint8_t req_tc, uint32_t op_type, std::span<const EpReq> reqs,
                   uint32_t rsp_timeout_ns, std::vector<EpRsp>* rsp);

  struct Counters {
    uint64_t requests = 0, responses = 0, unmatched = 0, late = 0, timeouts = 0;
  };
  const Counters& counters() const { return ctr_; }
  size_t outstanding() const { return out_.size(); }

 private:
  struct Outstanding {
    uint64_t batch = 0;  // 0 = its batch finished (draining)
    codec::IpAddr dst;
    Time drain_until = 0;
  };
  struct Batch {
    uint64_t id = 0;
    Time deadline = 0;
    uint32_t num_req = 0;
    std::vector<uint16_t> ids;
    std::vector<EpRsp> rsps;
    std::vector<EpArrival> detail;
  };
  void expire(Time now);
  EpBatchDone finish(Batch& b, int err, Time now);

  EpTransport& t_;
  EpLimits lim_;
  PortCheck check_;
  uint64_t next_id_ = 1;
  std::map<uint16_t, Outstanding> out_;
  std::map<uint64_t, Batch> batches_;
  Counters ctr_;
};

}  // namespace mrc::ctl
