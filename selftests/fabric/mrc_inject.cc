// mrc_inject: an adversarial MRC packet generator for a live transfer on the
// veth fabric (issue 20; selftests/fabric/tests/inject.sh runs it in CI).
//
//   mrc_inject --netns NS --to-a IF[,IF...] --to-b IF[,IF...]
//              [--duration S] [--count N] [--pps N] [--classes C[,C...]]
//              [--learn-timeout S] [--replay-age-ms MS] [--seed N] [--out FILE]
//              [--cuts ip,udp,bth,bth_fixed,ext,ext_fixed,payload,icrc]
//
// Attacker model. An observer on the links between host A (the requester,
// mrc_perf client) and host B (the responder, mrc_perf server): it reads
// every frame that crosses a link and can put frames of its own on it, but
// holds no key and no memory region of either host. Concretely it runs in
// the fabric's wire namespace W (fabric.sh direct, wire=on): --to-a names the
// interfaces of W that face A (w<p>a), --to-b those that face B (w<p>b), one
// per plane, in the same order. An AF_PACKET socket on each w<p>a sees both
// directions of plane p (A->B arriving, B->A leaving); from that traffic the
// tool learns MACs, addresses, the UDP port, both QPNs, the requester's
// highest PSN sent (A->B data) and the responder's cumulative ACK (B->A SACK),
// and keeps a ring of A->B data frames for replay. It injects with
// PACKET_QDISC_BYPASS sockets on w<p>b (towards B) and w<p>a (towards A):
// those skip the taps, so the tool never learns from its own frames, and the
// fabric's shaping (tbf on W's egress) does not delay them.
//
// Classes (names as in the JSON report), every forged packet from the real
// peer's MAC and address on the plane it is sent on. Classes 1-3 are
// malformed; every other packet is a complete frame with a valid ICRC built
// by codec::build (or, for replays, a captured frame resent unchanged):
//
//   truncated     1  valid frames cut inside the IP, UDP, BTH, extension
//                    header, payload or ICRC; some with IP/UDP lengths fixed up
//                    to the cut (so the MRC length checks, not IP's, see them)
//   bad_icrc      2  valid frames of every opcode with one ICRC byte flipped
//   bad_bth       3  BTH version 1..15, a reserved BTH bit set, or an opcode
//                    outside MRC's table
//   unknown_qpn   4  valid frames of every QP opcode to a QPN nobody uses
//   ghost_sack    5  to A: SACK whose cumulative PSN is far (50000+) beyond the
//                    requester's highest PSN sent
//   ghost_nack    6  to A: NACK of every reason code naming a PSN never sent
//   ghost_nak     7  to A: AETH NAK (syndromes 0x60-0x63) naming a PSN never sent
//   stale_nack    8  to A: NACK of every reason naming a PSN 300-500 below the
//                    responder's cumulative ACK (acknowledged, inside the window)
//   stale_nak     8  to A: AETH NAK (0x60-0x63) likewise
//   oor_data      9  to B: data of every data opcode 100000+ PSNs beyond the
//                    requester's highest PSN (outside the receive window)
//   replay       10  to B: A->B data frames captured at least --replay-age-ms
//                    earlier, resent unchanged (duplicates)
//   bad_rkey     11  to B: WRITE ONLY/FIRST/MIDDLE/LAST 300-500 PSNs ahead of the
//                    requester's highest PSN (inside the window, not yet
//                    sent), random rkey and VA
//   probe        12  to B: reliability probes (PETH) nobody sent; B answers A
//                    with a probe-answer SACK A never asked for
//   probe_sack   12  to A: probe-answer SACKs (PR set) for EVs and timestamps A
//                    never probed, cumulative PSN = B's latest
//   ep_response  13  to A: endpoint responses (EV probe) answering no request
//   port_status  13  to A: port status updates from B's address on plane p
//                    saying B's port p+1 (the plane it arrives through) is down
//
// Classes take turns packet by packet, planes likewise; every millisecond
// the packets due go out in one sendmmsg() batch per socket; --pps bounds the
// total rate (a few thousand per second), --duration and --count the run.
// Injection starts once the tool has learned both QPNs, a PSN and a
// cumulative ACK (at most --learn-timeout seconds; exit 1 otherwise). SIGINT
// or SIGTERM ends it early (the test stops it when the transfer ends). At the
// end it prints one JSON object: packets injected per class (and per variant:
// opcode, reason, cut point), send failures, what it learned, the time.
#include <arpa/inet.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <deque>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "codec/packet.hpp"
#include "fabric_util.hpp"
#include "util/strings.hpp"

namespace mrc::fabric {
namespace {

using nlohmann::json;

// SIGINT/SIGTERM end the injection early; the report is still printed.
std::atomic<bool> g_stop{false};
void on_signal(int) { g_stop.store(true); }

uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

std::vector<std::string> split(const std::string& s) { return mrc::util::split(s, ',', true); }

const std::vector<std::string> kClasses = {
    "truncated", "bad_icrc",   "bad_bth",     "unknown_qpn", "ghost_sack", "ghost_nack",
    "ghost_nak", "stale_nack", "stale_nak",   "oor_data",    "replay",     "bad_rkey",
    "probe",     "probe_sack", "ep_response", "port_status"};

constexpr uint8_t kDataOps[] = {MRC_OP_WRITE_FIRST,    MRC_OP_WRITE_MIDDLE, MRC_OP_WRITE_LAST,
                                MRC_OP_WRITE_LAST_IMM, MRC_OP_WRITE_ONLY,   MRC_OP_WRITE_ONLY_IMM};
constexpr uint8_t kNackReasons[] = {
    MRC_NACK_TRIMMED,     MRC_NACK_TRIMMED_LASTHOP, MRC_NACK_NO_BITMAP,  MRC_NACK_NO_PKT_BUFFER,
    MRC_NACK_NO_RESOURCE, MRC_NACK_PSN_OOR_WINDOW,  MRC_NACK_UNEXP_EVENT};
constexpr uint8_t kNakSyndromes[] = {0x60, 0x61, 0x62, 0x63};

std::string hex2(unsigned v) {
  char b[8];
  std::snprintf(b, sizeof b, "0x%02x", v);
  return b;
}

struct Plane {
  std::string to_a, to_b;
  int idx_a = 0, idx_b = 0;
  UniqueFd sniff, tx_a, tx_b;
  bool known = false;  // seen a valid A->B frame: MACs and addresses below
  codec::Mac mac_a{}, mac_b{};
  codec::IpAddr ip_a, ip_b;
};

struct Captured {
  std::vector<uint8_t> frame;
  uint64_t t = 0;
  size_t plane = 0;
};

struct Learned {
  bool qpn_a = false, qpn_b = false, psn = false, cack = false;
  uint32_t a = 0, b = 0;  // requester's (A) and responder's (B) QPN
  uint32_t max_psn = 0;   // highest PSN of A->B data seen
  uint32_t cack_psn = 0;  // latest cumulative ACK of B->A SACKs
  uint16_t dport = MRC_UDP_PORT_DEFAULT;
  uint64_t frames = 0, data = 0, sacks = 0;
  bool ready() const { return qpn_a && qpn_b && psn && cack; }
};

struct Pending {
  int fd;
  std::vector<uint8_t> frame;
  std::string cls, variant;
};

struct ClassCount {
  uint64_t injected = 0, send_errors = 0;
  std::map<std::string, uint64_t> variants;
};

class Injector {
 public:
  Injector(std::string ns, std::vector<Plane> planes, std::vector<std::string> classes,
           uint64_t seed, uint64_t replay_age_ns)
      : ns_(std::move(ns)),
        planes_(std::move(planes)),
        classes_(std::move(classes)),
        rng_(seed),
        replay_age_ns_(replay_age_ns) {
    for (const auto& c : classes_) counts_[c];
  }

  Status open() {
    auto scope = NetnsScope::enter(ns_);
    if (!scope) return std::move(scope).error();
    for (auto& p : planes_) {
      p.idx_a = int(if_nametoindex(p.to_a.c_str()));
      p.idx_b = int(if_nametoindex(p.to_b.c_str()));
      if (!p.idx_a || !p.idx_b)
        return make_error(ENODEV, "no interface " + p.to_a + " or " + p.to_b + " in " + ns_);
      auto s = bound(p.idx_a, false);
      if (!s) return std::move(s).error();
      p.sniff = std::move(*s);
      auto ta = bound(p.idx_a, true);
      if (!ta) return std::move(ta).error();
      p.tx_a = std::move(*ta);
      auto tb = bound(p.idx_b, true);
      if (!tb) return std::move(tb).error();
      p.tx_b = std::move(*tb);
    }
    return {};
  }

  // Reads what is waiting on every plane (at most `budget` frames each).
  void sniff(size_t budget) {
    for (size_t i = 0; i < planes_.size(); i++) {
      for (size_t k = 0; k < budget; k++) {
        sockaddr_ll from{};
        socklen_t fl = sizeof(from);
        ssize_t n = recvfrom(planes_[i].sniff.get(), buf_.data(), buf_.size(), MSG_DONTWAIT,
                             reinterpret_cast<sockaddr*>(&from), &fl);
        if (n <= 0) break;
        learn(i, std::span<const uint8_t>(buf_.data(), size_t(n)),
              from.sll_pkttype != PACKET_OUTGOING);
      }
    }
  }

  // Waits up to `ns` for traffic (poll on the sniffers).
  void wait(uint64_t ns) {
    std::vector<pollfd> pf;
    for (auto& p : planes_) pf.push_back({p.sniff.get(), POLLIN, 0});
    poll(pf.data(), pf.size(), int(std::max<uint64_t>(ns / 1000000, 1)));
  }

  const Learned& learned() const { return l_; }

  // Builds the next packet of the rotation and queues it (skips a class with
  // nothing to send yet, e.g. replay before any frame is old enough). False
  // when no class could build one.
  bool queue_one() {
    for (size_t tries = 0; tries < classes_.size(); tries++) {
      const std::string& c = classes_[next_class_++ % classes_.size()];
      size_t pi = 0;
      if (!pick_plane(pi)) return false;
      std::string variant;
      bool to_b = true;
      frame_.clear();
      if (!make(c, pi, variant, to_b)) continue;
      const Plane& p = planes_[pi];
      pending_.push_back({to_b ? p.tx_b.get() : p.tx_a.get(), std::move(frame_), c, variant});
      frame_ = {};
      return true;
    }
    return false;
  }
  size_t queued() const { return pending_.size(); }

  // Sends the queued frames, one sendmmsg() per socket, and counts them.
  void flush() {
    std::map<int, std::vector<size_t>> by_fd;
    for (size_t i = 0; i < pending_.size(); i++) by_fd[pending_[i].fd].push_back(i);
    for (auto& [fd, idx] : by_fd) {
      std::vector<iovec> iov(idx.size());
      std::vector<mmsghdr> msgs(idx.size());
      for (size_t k = 0; k < idx.size(); k++) {
        auto& f = pending_[idx[k]].frame;
        iov[k] = {f.data(), f.size()};
        msgs[k] = {};
        msgs[k].msg_hdr.msg_iov = &iov[k];
        msgs[k].msg_hdr.msg_iovlen = 1;
      }
      size_t k = 0;
      while (k < idx.size()) {
        const int n = sendmmsg(fd, msgs.data() + k, unsigned(idx.size() - k), 0);
        if (n <= 0) {  // the first unsent one failed: count it, go on after it
          Pending& pf = pending_[idx[k]];
          counts_[pf.cls].send_errors++;
          send_errors_++;
          if (last_errno_.empty()) last_errno_ = std::strerror(errno);
          k++;
          continue;
        }
        for (int m = 0; m < n; m++, k++) {
          Pending& pf = pending_[idx[k]];
          ClassCount& cc = counts_[pf.cls];
          if (msgs[k].msg_len == pf.frame.size()) {
            cc.injected++;
            cc.variants[pf.variant]++;
            total_++;
          } else {
            cc.send_errors++;
            send_errors_++;
          }
        }
      }
    }
    pending_.clear();
  }

  uint64_t total() const { return total_; }
  uint64_t attempted() const { return total_ + send_errors_; }
  uint64_t build_failures() const { return build_failures_; }

  json report() const {
    json cls = json::object();
    uint64_t errs = 0;
    for (const auto& c : classes_) {
      const ClassCount& cc = counts_.at(c);
      cls[c] = {
          {"injected", cc.injected}, {"send_errors", cc.send_errors}, {"variants", cc.variants}};
      errs += cc.send_errors;
    }
    auto ip = [](const codec::IpAddr& a) {
      char b[INET6_ADDRSTRLEN] = {};
      inet_ntop(a.ver == codec::IpVersion::kV4 ? AF_INET : AF_INET6, a.b.data(), b, sizeof b);
      return std::string(b);
    };
    json planes = json::array();
    for (const auto& p : planes_)
      planes.push_back({{"to_a", p.to_a},
                        {"to_b", p.to_b},
                        {"known", p.known},
                        {"ip_a", p.known ? ip(p.ip_a) : ""},
                        {"ip_b", p.known ? ip(p.ip_b) : ""}});
    return {{"classes", cls},
            {"injected", total_},
            {"send_errors", errs},
            {"send_error", last_errno_},
            {"build_failures", build_failures_},
            {"learned",
             {{"qpn_a", l_.a},
              {"qpn_b", l_.b},
              {"max_psn", l_.max_psn},
              {"cack_psn", l_.cack_psn},
              {"udp_port", l_.dport},
              {"frames", l_.frames},
              {"data", l_.data},
              {"sacks", l_.sacks},
              {"replay_ring", ring_.size()},
              {"planes", planes}}}};
  }

 private:
  static Result<UniqueFd> bound(int ifindex, bool tx) {
    UniqueFd fd(socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, tx ? 0 : htons(ETH_P_ALL)));
    if (!fd.valid()) return make_error(errno, "AF_PACKET socket");
    sockaddr_ll sll{};
    sll.sll_family = AF_PACKET;
    sll.sll_protocol = tx ? 0 : htons(ETH_P_ALL);
    sll.sll_ifindex = ifindex;
    if (bind(fd.get(), reinterpret_cast<sockaddr*>(&sll), sizeof(sll)) != 0)
      return make_error(errno, "binding an AF_PACKET socket");
    if (tx) {
      // Straight to the driver: no taps (our sniffers never see our own
      // frames) and no qdisc (the fabric's tbf does not delay them).
      int one = 1;
      if (setsockopt(fd.get(), SOL_PACKET, PACKET_QDISC_BYPASS, &one, sizeof(one)) != 0)
        return make_error(errno, "PACKET_QDISC_BYPASS");
    } else {
      int rcvbuf = 16 << 20;
      setsockopt(fd.get(), SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof(rcvbuf));
    }
    return fd;
  }

  void learn(size_t pi, std::span<const uint8_t> f, bool from_a) {
    l_.frames++;
    codec::Packet pk;
    if (codec::parse(f, cfg_, pk) != codec::ParseError::kOk) return;
    const uint8_t op = pk.bth.opcode;
    if (op == MRC_OP_EP_REQUEST || op == MRC_OP_EP_RESPONSE) return;
    Plane& p = planes_[pi];
    if (from_a) {
      p.mac_a = pk.eth.src, p.mac_b = pk.eth.dst, p.ip_a = pk.ip.src, p.ip_b = pk.ip.dst;
      p.known = true;
      l_.dport = pk.udp.dport;
      if (codec::is_data_opcode(op) && pk.trim == codec::TrimKind::kNone) {
        l_.data++;
        if (l_.qpn_b && pk.bth.dqpn != l_.b) l_.psn = false;  // a new QP: start over
        l_.b = pk.bth.dqpn, l_.qpn_b = true;
        if (!l_.psn || codec::psn_lt(l_.max_psn, pk.bth.psn)) l_.max_psn = pk.bth.psn;
        l_.psn = true;
        // Every 4th data frame goes to the replay ring (the newest 1024).
        if ((l_.data & 3) == 0) {
          ring_.push_back({std::vector<uint8_t>(f.begin(), f.end()), now_ns(), pi});
          if (ring_.size() > 1024) ring_.pop_front();
        }
      }
    } else if (op == MRC_OP_SACK || op == MRC_OP_NACK || op == MRC_OP_ACK) {
      if (l_.qpn_a && pk.bth.dqpn != l_.a) l_.cack = false;
      l_.a = pk.bth.dqpn, l_.qpn_a = true;
      if (op == MRC_OP_SACK) {
        l_.sacks++;
        if (!l_.cack || codec::psn_lt(l_.cack_psn, pk.seth.cack_psn))
          l_.cack_psn = pk.seth.cack_psn;
        l_.cack = true;
      }
    }
  }

  bool pick_plane(size_t& pi) {
    for (size_t k = 0; k < planes_.size(); k++) {
      pi = next_plane_++ % planes_.size();
      if (planes_[pi].known) return true;
    }
    return false;
  }

  uint32_t r32() { return uint32_t(rng_()); }

  // A packet from A to B (to_b) or from B to A on plane pi, headers only.
  codec::Packet base(size_t pi, bool to_b, uint8_t op) {
    const Plane& p = planes_[pi];
    codec::Packet k;
    k.eth.src = to_b ? p.mac_a : p.mac_b;
    k.eth.dst = to_b ? p.mac_b : p.mac_a;
    k.ip.src = to_b ? p.ip_a : p.ip_b;
    k.ip.dst = to_b ? p.ip_b : p.ip_a;
    const bool data = codec::is_data_opcode(op);
    k.ip.dscp = data ? MRC_DSCP_TRIMMABLE_DEFAULT : MRC_DSCP_CONTROL_DEFAULT;
    k.ip.ecn = data ? MRC_ECN_ECT0 : MRC_ECN_NOT_ECT;
    k.ip.id = uint16_t(r32());
    k.ip.flow_label = r32() & 0xfffff;
    k.udp.sport = uint16_t(0xc000 | (r32() & 0x3fff));
    k.udp.dport = l_.dport;
    k.bth.opcode = op;
    k.bth.dqpn = to_b ? l_.b : l_.a;
    return k;
  }

  // Data to B: 256 bytes of payload (a multiple of 4, as FIRST/MIDDLE need).
  codec::Packet data(size_t pi, uint8_t op, uint32_t psn) {
    codec::Packet k = base(pi, true, op);
    k.bth.psn = psn & MRC_PSN_MASK;
    k.meth.msn = uint16_t(r32());
    k.meth.rqmsn = uint16_t(r32());
    k.reth.va = (uint64_t(r32()) << 32 | r32()) & ~uint64_t(3);
    k.reth.rkey = r32();
    k.reth.dma_len = (op == MRC_OP_WRITE_FIRST || op == MRC_OP_WRITE_MIDDLE) ? 4096 : 256;
    k.imm = r32();
    k.payload = payload_.data();
    k.payload_len = 256;
    return k;
  }

  codec::Packet sack(size_t pi, uint32_t cack, bool probe_resp) {
    codec::Packet k = base(pi, false, MRC_OP_SACK);
    k.bth.psn = cack & MRC_PSN_MASK;
    k.seth.cack_psn = cack & MRC_PSN_MASK;
    k.seth.probe_resp = probe_resp;
    k.seth.entropy = r32();
    k.seth.spdcid = uint16_t(l_.b), k.seth.dpdcid = uint16_t(l_.a);
    k.seth.sack_bitmap = probe_resp ? 0 : (uint64_t(r32()) << 32 | r32());
    k.cc.tx_ts_echo = uint16_t(r32());
    return k;
  }

  codec::Packet nack(size_t pi, uint8_t reason, uint32_t psn) {
    codec::Packet k = base(pi, false, MRC_OP_NACK);
    k.bth.psn = psn & MRC_PSN_MASK;
    k.neth.reason = reason;
    k.neth.nack_psn = psn & MRC_PSN_MASK;
    k.neth.entropy = r32();
    k.neth.spdcid = uint16_t(l_.b), k.neth.dpdcid = uint16_t(l_.a);
    k.neth.tx_ts_echo = uint16_t(r32());
    return k;
  }

  codec::Packet aeth(size_t pi, uint8_t syndrome, uint32_t psn) {
    codec::Packet k = base(pi, false, MRC_OP_ACK);
    k.bth.psn = psn & MRC_PSN_MASK;
    k.aeth.syndrome = syndrome;
    k.aeth.msn = r32() & 0xffffff;
    return k;
  }

  codec::Packet probe(size_t pi) {
    codec::Packet k = base(pi, true, MRC_OP_PROBE);
    k.bth.psn = l_.max_psn;
    k.peth.probe_id = uint16_t(r32());
    k.peth.spdcid = uint16_t(l_.a), k.peth.dpdcid = uint16_t(l_.b);
    k.peth.tx_ts = uint16_t(r32());
    return k;
  }

  // Any valid packet of a random opcode, to B (data, probe) or A (control).
  codec::Packet any(size_t pi, std::string& variant) {
    switch (r32() % 5) {
      case 0: {
        const uint8_t op = kDataOps[r32() % std::size(kDataOps)];
        variant = "data " + hex2(op);
        return data(pi, op, l_.max_psn + 100000);
      }
      case 1:
        variant = "sack";
        return sack(pi, l_.cack_psn, false);
      case 2:
        variant = "nack";
        return nack(pi, MRC_NACK_TRIMMED, l_.cack_psn);
      case 3:
        variant = "ack";
        return aeth(pi, 0x60, l_.cack_psn);
      default:
        variant = "probe";
        return probe(pi);
    }
  }

  bool emit(const codec::Packet& k) {
    frame_.resize(codec::frame_size(k) + 64);
    const size_t n = codec::build(k, frame_);
    if (!n) {
      build_failures_++;
      frame_.clear();
      return false;
    }
    frame_.resize(n);
    return true;
  }

  // Sets IPv4 total length (and checksum) or IPv6 payload length, and the
  // UDP length, to a frame cut at frame_.size().
  void fix_lengths(const codec::Packet& layout) {
    const size_t n = frame_.size();
    const size_t l3 = layout.l3_off, l4 = layout.l4_off;
    auto put16 = [&](size_t off, uint32_t v) {
      frame_[off] = uint8_t(v >> 8);
      frame_[off + 1] = uint8_t(v);
    };
    if (layout.ip.src.ver == codec::IpVersion::kV4) {
      put16(l3 + 2, uint32_t(n - l3));
      put16(l3 + 10, 0);
      uint32_t sum = 0;
      for (size_t i = 0; i < 20; i += 2) sum += uint32_t(frame_[l3 + i]) << 8 | frame_[l3 + i + 1];
      while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
      put16(l3 + 10, ~sum & 0xffff);
    } else {
      put16(l3 + 4, uint32_t(n - l3 - 40));
    }
    put16(l4 + 4, uint32_t(n - l4));
  }

  // Builds the next packet of class c into frame_ (on plane pi; a replay
  // moves pi to the plane its frame was captured on).
  bool make(const std::string& c, size_t& pi, std::string& variant, bool& to_b) {
    const uint32_t ahead = l_.max_psn;
    if (c == "truncated" || c == "bad_icrc" || c == "bad_bth" || c == "unknown_qpn") {
      codec::Packet k = any(pi, variant);
      to_b = codec::is_data_opcode(k.bth.opcode) || k.bth.opcode == MRC_OP_PROBE;
      if (c == "unknown_qpn") {
        do k.bth.dqpn = 0x800000 | (r32() & 0x7fffff);
        while (k.bth.dqpn == l_.a || k.bth.dqpn == l_.b);
      }
      if (!emit(k)) return false;
      codec::Packet lay;
      if (codec::parse(frame_, cfg_, lay) != codec::ParseError::kOk) {
        build_failures_++;
        return false;
      }
      if (c == "bad_icrc") {
        frame_[frame_.size() - 1 - (r32() % 4)] ^= uint8_t(1 + r32() % 255);
      } else if (c == "bad_bth") {
        const size_t b = lay.bth_off;
        switch (r32() % 3) {
          case 0:
            frame_[b + 1] = uint8_t((frame_[b + 1] & ~MRC_BTH_TVER_MASK) | (1 + r32() % 15));
            variant = "tver";
            break;
          case 1:
            frame_[b + 8] |= (r32() & 1) ? 0x40 : uint8_t(1 << (r32() % 4));  // resv6 / resv(27:24)
            variant = "reserved";
            break;
          default: {
            static constexpr uint8_t kBad[] = {0x00, 0x04, 0x0a, 0x64, 0xc0, 0xc5, 0xcc,
                                               0xd0, 0xd2, 0xda, 0xdf, 0xe0, 0xff};
            frame_[b] = kBad[r32() % std::size(kBad)];
            variant = "opcode " + hex2(frame_[b]);
          }
        }
      } else if (c == "truncated") {
        // Cut points: inside IP, UDP, BTH, the extension headers, the
        // payload, the ICRC; "fixed" ones carry IP/UDP lengths of the cut.
        const size_t end = frame_.size();
        const size_t ext = lay.bth_off + 12;
        // (payload_off is set for packets with a payload only)
        const size_t hdr_end = ext + codec::ext_header_len(lay.bth.opcode, lay.bth.ts);
        size_t cut = 0;
        bool fixed = false;
        static const std::vector<std::string> kCuts = {"ip",  "udp",       "bth",     "bth fixed",
                                                       "ext", "ext fixed", "payload", "icrc"};
        size_t which = r32() % kCuts.size();
        if (!cuts_.empty())
          which = size_t(std::find(kCuts.begin(), kCuts.end(), cuts_[r32() % cuts_.size()]) -
                         kCuts.begin());
        switch (which) {
          case 0:
            cut = lay.l3_off + 1 + r32() % (lay.l4_off - lay.l3_off - 1), variant = "ip";
            break;
          case 1:
            cut = lay.l4_off + 1 + r32() % 7, variant = "udp";
            break;
          case 2:
            cut = lay.bth_off + 1 + r32() % 11, variant = "bth";
            break;
          case 3:
            cut = lay.bth_off + 1 + r32() % 11, fixed = true, variant = "bth fixed";
            break;
          case 4:
            cut = ext + 1 + r32() % (hdr_end - ext - 1), variant = "ext";
            break;
          case 5:
            cut = ext + 1 + r32() % (hdr_end - ext - 1), fixed = true;
            variant = "ext fixed";
            break;
          case 6:
            if (hdr_end + 4 < end) {
              cut = hdr_end + 1 + r32() % (end - 4 - hdr_end - 1), variant = "payload";
            } else {  // a control packet: no payload, inside its last header then
              cut = ext + 1 + r32() % (hdr_end - ext - 1), variant = "ext";
            }
            break;
          default:
            cut = end - 1 - r32() % 3, variant = "icrc";
            break;
        }
        cut = std::clamp<size_t>(cut, lay.l3_off + 1, end - 1);
        frame_.resize(cut);
        if (fixed) fix_lengths(lay);
      } else {
        variant = variant + (to_b ? " to B" : " to A");
      }
      return true;
    }
    if (c == "ghost_sack") {
      variant = "cack +50000";
      to_b = false;
      return emit(sack(pi, ahead + 50000 + (r32() % 50000), false));
    }
    if (c == "ghost_nack" || c == "stale_nack") {
      const uint8_t reason = kNackReasons[counts_[c].injected % std::size(kNackReasons)];
      variant = "reason " + hex2(reason);
      to_b = false;
      const uint32_t psn =
          c == "ghost_nack" ? ahead + 50000 + (r32() % 50000) : l_.cack_psn - 300 - (r32() % 200);
      return emit(nack(pi, reason, psn));
    }
    if (c == "ghost_nak" || c == "stale_nak") {
      const uint8_t syn = kNakSyndromes[counts_[c].injected % std::size(kNakSyndromes)];
      variant = "syndrome " + hex2(syn);
      to_b = false;
      const uint32_t psn =
          c == "ghost_nak" ? ahead + 50000 + (r32() % 50000) : l_.cack_psn - 300 - (r32() % 200);
      return emit(aeth(pi, syn, psn));
    }
    if (c == "oor_data") {
      const uint8_t op = kDataOps[counts_[c].injected % std::size(kDataOps)];
      variant = "opcode " + hex2(op);
      return emit(data(pi, op, ahead + 100000 + (r32() % 100000)));
    }
    if (c == "bad_rkey") {
      static constexpr uint8_t kOps[] = {MRC_OP_WRITE_ONLY, MRC_OP_WRITE_FIRST, MRC_OP_WRITE_MIDDLE,
                                         MRC_OP_WRITE_LAST};
      const uint8_t op = kOps[counts_[c].injected % std::size(kOps)];
      variant = "opcode " + hex2(op);
      return emit(data(pi, op, ahead + 300 + (r32() % 200)));
    }
    if (c == "replay") {
      const uint64_t now = now_ns();
      // The oldest frame old enough that was not replayed yet (each once).
      while (!ring_.empty() && ring_.front().t + replay_age_ns_ <= now) {
        Captured cap = std::move(ring_.front());
        ring_.pop_front();
        if (!planes_[cap.plane].known) continue;
        frame_ = std::move(cap.frame);
        pi = cap.plane;  // out of the plane it was captured on
        variant = "captured";
        return true;
      }
      return false;
    }
    if (c == "probe") {
      variant = "peth";
      return emit(probe(pi));
    }
    if (c == "probe_sack") {
      variant = "pr sack";
      to_b = false;
      return emit(sack(pi, l_.cack_psn, true));
    }
    if (c == "ep_response") {
      codec::Packet k = base(pi, false, MRC_OP_EP_RESPONSE);
      k.bth.dqpn = MRC_QPN_ENDPOINT;
      k.eeth.op = MRC_EP_OP_EV_PROBE;
      k.eeth.req_id = uint16_t(r32());
      k.eeth.port_status = (1u << planes_.size()) - 1;
      k.eeth.entropy = r32();
      k.eeth.rx_port = uint8_t(1 + pi);
      k.eeth.tx_ts_echo = uint16_t(r32());
      variant = "ev probe";
      to_b = false;
      return emit(k);
    }
    if (c == "port_status") {
      codec::Packet k = base(pi, false, MRC_OP_EP_REQUEST);
      k.bth.dqpn = MRC_QPN_ENDPOINT;
      k.erth.op = MRC_EP_OP_PORT_STATUS_UPDATE;
      k.erth.req_id = uint16_t(r32());
      k.erth.port_status = ((1u << planes_.size()) - 1) & ~(1u << pi);  // its own plane down
      k.erth.entropy = r32();
      variant = "plane " + std::to_string(pi) + " down";
      to_b = false;
      return emit(k);
    }
    return false;
  }

  std::string ns_;
  std::vector<Plane> planes_;
  std::vector<std::string> classes_;
  std::mt19937_64 rng_;
  uint64_t replay_age_ns_;
  codec::CodecConfig cfg_;
  Learned l_;
  std::deque<Captured> ring_;
  std::vector<Pending> pending_;
  std::map<std::string, ClassCount> counts_;
  std::vector<uint8_t> buf_ = std::vector<uint8_t>(70000);
  std::vector<uint8_t> frame_;
  std::vector<uint8_t> payload_ = std::vector<uint8_t>(256, 0xa5);
  size_t next_class_ = 0, next_plane_ = 0;
  uint64_t total_ = 0, send_errors_ = 0, build_failures_ = 0;
  std::string last_errno_;

 public:
  std::vector<std::string> cuts_;  // --cuts: the truncation variants to use (all)
};

int run(std::map<std::string, std::string>& o) {
  auto get = [&](const char* k, const char* d) { return o.count(k) ? o[k] : std::string(d); };
  const auto to_a = split(get("--to-a", "")), to_b = split(get("--to-b", ""));
  if (to_a.empty() || to_a.size() != to_b.size() || !o.count("--netns")) {
    std::cerr << "mrc_inject: need --netns, and --to-a and --to-b with one interface per plane\n";
    return 2;
  }
  const double duration = std::stod(get("--duration", "4"));
  const uint64_t count = std::stoull(get("--count", "100000"));
  const uint64_t pps = std::max<uint64_t>(std::stoull(get("--pps", "3000")), 1);
  const double learn_timeout = std::stod(get("--learn-timeout", "5"));
  const uint64_t seed = std::stoull(get("--seed", std::to_string(now_ns()).c_str()));
  const uint64_t replay_age_ns = std::stoull(get("--replay-age-ms", "30")) * 1000000ull;
  std::vector<std::string> classes = o.count("--classes") ? split(o["--classes"]) : kClasses;
  for (const auto& c : classes)
    if (std::find(kClasses.begin(), kClasses.end(), c) == kClasses.end()) {
      std::cerr << "mrc_inject: unknown class " << c << "\n";
      return 2;
    }
  if (duration <= 0 || duration > 600 || learn_timeout <= 0 || learn_timeout > 600) {
    std::cerr << "mrc_inject: --duration and --learn-timeout must be in (0, 600] seconds\n";
    return 2;
  }
  std::vector<Plane> planes(to_a.size());
  for (size_t i = 0; i < planes.size(); i++) planes[i].to_a = to_a[i], planes[i].to_b = to_b[i];
  Injector inj(o["--netns"], std::move(planes), classes, seed, replay_age_ns);
  for (auto& c : split(get("--cuts", ""))) {
    static const std::vector<std::string> kCuts = {"ip",  "udp",       "bth",     "bth_fixed",
                                                   "ext", "ext_fixed", "payload", "icrc"};
    if (std::find(kCuts.begin(), kCuts.end(), c) == kCuts.end()) {
      std::cerr << "mrc_inject: unknown cut " << c << "\n";
      return 2;
    }
    inj.cuts_.push_back(c == "bth_fixed" ? "bth fixed" : c == "ext_fixed" ? "ext fixed" : c);
  }
  if (auto s = inj.open(); !s) {
    std::cerr << "mrc_inject: " << s.error().message() << "\n";
    return 1;
  }
  // Learn: until both QPNs, a PSN and a cumulative ACK are known.
  const uint64_t t0 = now_ns();
  while (!g_stop.load() && !inj.learned().ready() &&
         now_ns() - t0 < uint64_t(learn_timeout * 1e9)) {
    inj.wait(10000000);
    inj.sniff(4096);
  }
  const double learn_s = double(now_ns() - t0) / 1e9;
  json out;
  int rc = 0;
  double inject_s = 0;
  if (!inj.learned().ready()) {
    out["error"] = "learned too little to inject within --learn-timeout";
    rc = 1;
  } else {
    // Inject: every ms, the packets due at --pps, sniffing in between.
    const uint64_t t1 = now_ns(), t_end = t1 + uint64_t(duration * 1e9);
    while (inj.attempted() < count && !g_stop.load()) {
      const uint64_t now = now_ns();
      if (now >= t_end) break;
      inj.sniff(256);
      const uint64_t due = std::min<uint64_t>((now - t1) * pps / 1000000000ull, count);
      // The packets due, sent as one batch per socket (at most 256).
      while (inj.attempted() + inj.queued() < due && inj.queued() < 256)
        if (!inj.queue_one()) break;
      inj.flush();
      timespec ts{0, 1000000};
      nanosleep(&ts, nullptr);
    }
    inject_s = double(now_ns() - t1) / 1e9;
  }
  json r = inj.report();
  r["stopped_early"] = g_stop.load();
  for (auto& [k, v] : out.items()) r[k] = v;
  r["learn_s"] = learn_s;
  r["inject_s"] = inject_s;
  r["pps"] = pps;
  r["seed"] = seed;
  if (inj.build_failures()) rc = 1;
  const std::string text = r.dump();
  if (o.count("--out")) std::ofstream(o["--out"]) << text << "\n";
  std::cout << text << "\n";
  return rc;
}

}  // namespace
}  // namespace mrc::fabric

int main(int argc, char** argv) {
  std::map<std::string, std::string> o;
  for (int i = 1; i < argc; i++) {
    std::string k = argv[i];
    if (k == "-h" || k == "--help") {
      std::cout
          << "usage: mrc_inject --netns NS --to-a IF[,IF...] --to-b IF[,IF...] [--duration S]\n"
             "       [--count N] [--pps N] [--classes C,...] [--learn-timeout S]\n"
             "       [--replay-age-ms MS] [--seed N] [--out FILE]   (see the source header)\n";
      return 0;
    }
    if (k.rfind("--", 0) == 0 && i + 1 < argc) {
      o[k] = argv[++i];
    } else {
      std::cerr << "mrc_inject: bad argument " << k << "\n";
      return 2;
    }
  }
  struct sigaction sa {};
  sa.sa_handler = mrc::fabric::on_signal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  try {
    return mrc::fabric::run(o);
  } catch (const std::exception& e) {  // std::stoul on a bad number
    std::cerr << "mrc_inject: bad number (" << e.what() << ")\n";
    return 2;
  }
}
