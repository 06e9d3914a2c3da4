// The control protocol between libmrc (client mode) and mrc-serviced
// (Documentation/service.md, "Control: a Unix socket"): one SOCK_SEQPACKET
// message per request and per reply, a fixed header and a fixed payload per
// operation, file descriptors by SCM_RIGHTS. Sizes and descriptor counts are
// exact per operation (check_request / check_reply): anything else is an
// error reply, and a message that cannot be framed ends the connection.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "mrc/mrc.hpp"
#include "mrc/result.hpp"
#include "svc/pieces.hpp"
#include "svc/shm.hpp"
#include "util/unique_fd.hpp"

namespace mrc::svc {

constexpr uint32_t kMagic = 0x5343524d;  // "MRCS" in memory order
constexpr uint16_t kVersion = 1;
constexpr size_t kMaxPayload = 4096;

constexpr size_t kMaxFds = kMaxPieces;
constexpr size_t kIfName = 16;
constexpr size_t kPortAddrs = 4;
constexpr const char* kDefaultSocket = "/run/mrc/service.sock";

enum class Op : uint16_t {
  kHello = 1,
  kAllocPd,
  kDeallocPd,
  kRegMr,
  kDeregMr,
  kCreateCq,
  kDestroyCq,
  kCreateChannel,
  kCreateQp,
  kDestroyQp,
  kModifyQp,
  kQueryQp,
  kQpStats,
  kStats,
  kObserve,  // read-only, needs no HELLO (a second kind of client: mrcctl)
  kEnd,      // one past the last
};
const char* to_string(Op op);

struct MsgHdr {
  uint32_t magic;
  uint16_t version;
  uint16_t op;
  uint32_t seq;
  uint32_t len;    // payload bytes that follow
  int32_t status;  // reply: 0 or a positive errno
  uint32_t nfds;   // SCM_RIGHTS descriptors attached
};
static_assert(sizeof(MsgHdr) == 24);

// ---- payloads (every one trivially copyable, sent as its bytes) ----------

struct HelloReq {
  uint32_t api_version;
  uint32_t flags;  // none defined: 0
  uint16_t udp_port;
  uint8_t nifs, rsvd;
  char ifnames[kMaxPorts][kIfName];  // NUL-terminated within kIfName
};

struct WirePort {
  uint8_t port, link_up, naddrs, rsvd;
  int32_t ifindex;
  uint32_t mtu, queues, max_path_mtu;
  uint8_t mac[6];
  char ifname[kIfName], xdp_mode[16], xsk_mode[16], tx[8];
  IpAddr addrs[kPortAddrs];
};

struct HelloRep {
  uint32_t client_id;
  int32_t service_pid;
  uint64_t area_size;
  DeviceAttr attr;
  uint32_t max_path_mtu, rx_frame_capacity;
  uint8_t tx_live, nports, rsvd[2];
  WirePort ports[kMaxPorts];
  char tx_note[160];
};  // fds: the shared area memfd, the write end of the doorbell pipe, the read
    // end of the async event pipe

struct Handle {
  uint32_t h;
};
struct Piece {
  uint64_t fd_offset, addr, len;
};
struct RegMrReq {
  uint32_t pd, access;
  uint64_t iova, length;
  uint32_t npieces, rsvd;
  Piece pieces[kMaxPieces];
};  // fds: one memfd per piece (npieces)
struct RegMrRep {
  uint32_t lkey, rkey;
};
struct CreateCqReq {
  uint32_t cqe, channel;  // channel handle + 1, 0: none
};
struct CreateCqRep {
  uint32_t h, rsvd;
  CqLayout lay;
};
// CREATE_CHANNEL: no payload; the reply's fd: the read end of the channel's
// pipe (the service keeps the write end).
struct CreateQpReq {
  QpInitAttr init;  // send_cq, recv_cq and pd are client handles
};
struct CreateQpRep {
  uint32_t h, qpn;
  QpLayout lay;
};
struct ModifyQpReq {
  uint32_t h, ibv_mask, mrc_mask, rsvd;
  QpAttr attr;
};
struct StatsRep {
  EngineStats eng;
  Context::XskStats xsk;
};

// OBSERVE (Documentation/service.md, "Visibility"): one page of the
// service's clients, from index `first` on; `total` says how many there are.
struct ObserveReq {
  uint32_t first, rsvd;
};
struct ObserveClient {
  uint32_t id, uid;
  int32_t pid;
  uint32_t qps, cqs, mrs;
  uint64_t mr_bytes;            // registered bytes now
  uint64_t tx_bytes, rx_bytes;  // payload bytes of its QPs (destroyed ones included)
  uint64_t errors;              // error completions + refused requests + remote access errors
  char comm[16];                // /proc/PID/comm at connect, NUL-terminated
};
constexpr size_t kObservePage = 48;
struct ObserveRep {
  uint32_t total, first, count;
  uint8_t sched;        // the engine thread's scheduling obtained (EngineSched)
  uint8_t sched_asked;  // and asked for (--sched, $MRC_ENGINE_SCHED)
  uint8_t rsvd[2];
  ObserveClient c[kObservePage];
  char sched_why[160];  // Context::engine_sched_reason(): what it got and why, NUL-terminated
};

static_assert(sizeof(ObserveRep) <= kMaxPayload && sizeof(HelloReq) <= kMaxPayload &&
              sizeof(HelloRep) <= kMaxPayload && sizeof(RegMrReq) <= kMaxPayload &&
              sizeof(ModifyQpReq) <= kMaxPayload && sizeof(StatsRep) <= kMaxPayload &&
              sizeof(QpAttr) <= kMaxPayload && sizeof(QpStats) <= kMaxPayload);

// Exact payload bytes and descriptors of a request and of a successful
// reply (fds of REG_MR: at most kMaxPieces, equal to npieces, checked by the
// service once it read npieces).
struct OpShape {
  uint32_t req_len, req_fds, rep_len, rep_fds;
  bool req_fds_variable;
};
// False for an op that does not exist.
bool op_shape(uint16_t op, OpShape& out);

// ---- the codec (no I/O: unit-tested) ---------------------------------------

// A received message: header, payload bytes, and the descriptors that came
// with it (owned; closed with it whatever happens).
struct Msg {
  MsgHdr hdr{};
  std::vector<uint8_t> payload;
  std::vector<UniqueFd> fds;
  template <class T>
  const T* as() const {
    static_assert(std::is_trivially_copyable_v<T>);
    return payload.size() == sizeof(T) ? reinterpret_cast<const T*>(payload.data()) : nullptr;
  }
};

// A request as the service must see it: magic, version, a known op, the
// exact payload length and descriptor count. EINVAL (EPROTO for magic and
// version) with a sentence.
Status check_request(const Msg& m);
// A reply to the request (op, seq): success has the exact shape, a failure
// carries a positive errno, no descriptors and a sentence.
Status check_reply(const Msg& m, Op op, uint32_t seq);

// Header + payload in one buffer (what goes on the socket).
std::vector<uint8_t> encode(const MsgHdr& h, const void* payload, size_t len);
// Splits a received datagram (with its descriptors) into a Msg; EPROTO when
// it is shorter than a header or its len disagrees with its size.
Result<Msg> decode(const uint8_t* buf, size_t len, std::vector<UniqueFd>&& fds);

// ---- socket I/O -----------------------------------------------------------

// Sends one message; EPIPE/ECONNRESET mean the peer is gone.
Status send_msg(int sock, const MsgHdr& h, const void* payload, size_t len, const int* fds,
                size_t nfds);
// Receives one message (blocking unless the socket is non-blocking). ENOTCONN
// for an orderly end of the connection, EPROTO for a datagram that cannot be
// framed (truncated, too long, descriptors cut off).
Result<Msg> recv_msg(int sock);

// A reply header for request h.
MsgHdr reply_hdr(const MsgHdr& req, int status, size_t len, size_t nfds);

}  // namespace mrc::svc
