// Out-of-band setup for MRC QPs, as RDMA applications do it: the two sides
// swap their QP attributes (QPN, PSN, GID per plane, buffer address and rkey,
// responder limits) over a TCP connection, then each brings its QPs to RTS.
// mrc_perf and the examples use this; applications may use their own.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/types.hpp"
#include "mrc/mrc.hpp"
#include "util/unique_fd.hpp"

namespace mrc {

struct QpEndpoint {
  uint32_t qpn = 0;
  uint32_t psn = 0;
  std::vector<Gid> gids;  // index = port - 1; an empty slot has version v4 and all zero
  uint64_t addr = 0;      // a buffer the peer may write
  uint64_t len = 0;
  uint32_t rkey = 0;
  uint16_t max_wimm_dest = 0;
  uint8_t mpr_dest = 0;
  uint32_t mtu = 0;      // the path MTU this end wants (0: none)
  uint32_t max_mtu = 0;  // the largest every plane interface of this end carries (0: unknown)
};

// One line per endpoint, "key=value" fields (Documentation/api.md).
std::string encode(const std::vector<QpEndpoint>& eps);
Result<std::vector<QpEndpoint>> decode(const std::string& text);

// TCP helpers: a listening socket, an accepted or connected stream, and the
// exchange itself (send ours, receive theirs; both sides may call it at once).
Result<UniqueFd> tcp_listen(const std::string& bind_addr, uint16_t port);
Result<UniqueFd> tcp_accept(int listen_fd, int timeout_ms);
Result<UniqueFd> tcp_connect(const std::string& host, uint16_t port, int timeout_ms);
Result<std::vector<QpEndpoint>> exchange_endpoints(int fd, const std::vector<QpEndpoint>& ours,
                                                   int timeout_ms = 10000);
// A short text message on the same stream (results, "done", verification).
Status send_line(int fd, const std::string& line);
Result<std::string> recv_line(int fd, int timeout_ms);

struct ConnectOptions {
  // Path MTU, payload bytes per packet. 0: the largest every plane of both
  // ends carries (Context::path_mtu_limit() of each end, swapped as
  // QpEndpoint::max_mtu). Else this value, or connect_qp() fails (EMSGSIZE,
  // naming the interface) when a plane of either end cannot carry it.
  uint32_t mtu = 0;
  uint8_t mpr = 8;
  uint16_t max_wimm = 64;
  // 1.024 us x 2^14 = 16.8 ms: a software responder may be descheduled for a
  // few milliseconds on a busy host; RACK and probes recover faster losses.
  uint8_t timeout = 14;
  uint8_t retry_linear = 7, retry_exp = 7;
  uint64_t ev_profile = 0, cc_profile = 0;
  uint32_t access = core::kAccessLocalWrite | core::kAccessRemoteWrite;
  uint32_t cap_flags = 0;
  codec::IpVersion ip = codec::IpVersion::kV4;
};

// Our half of an endpoint description for `qp` (GIDs of every port; mtu and
// max_mtu from ConnectOptions::mtu and our planes).
QpEndpoint describe(const Context& ctx, const Qp& qp, uint32_t psn, const ConnectOptions& o,
                    uint16_t max_wimm_dest, uint8_t mpr_dest);
// RESET -> INIT -> RTR -> RTS towards `peer`, resolving next hops per plane.
// path_mtu: ConnectOptions::mtu (checked against both ends' planes), else the
// smallest of our limit, peer.max_mtu and peer.mtu.
Status connect_qp(Context& ctx, Qp& qp, uint32_t our_psn, const QpEndpoint& peer,
                  const ConnectOptions& o);

}  // namespace mrc
