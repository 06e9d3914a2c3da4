// A deterministic two-host harness for engine conformance tests: P planes of
// direct links with fixed latency, virtual time, and a hook that may drop,
// delay or rewrite any frame on the wire. (The property tests and figures use
// the full simulated fabric in user/sim/.)
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "codec/packet.hpp"
#include "core/engine.hpp"
#include "core/rng.hpp"
#include "engine/addrs.hpp"

namespace mrc::testing {

using core::Time;

struct WireFrame {
  int to = 0;  // host index
  uint8_t port = 0;
  std::vector<uint8_t> bytes;
  Time arrived = 0;  // at the receiving host (its XDP timestamp); 0: when delivered
};

// Verdict of the wire hook for one frame.
struct Hook {
  bool drop = false;
  bool dup = false;  // deliver a second copy right after the first
  Time extra_delay = 0;
  // The last host_wait of extra_delay the frame spends at the receiving
  // host, arrived (XDP stamps it then) but not yet read by its engine.
  Time host_wait = 0;
};

// Rewrites a built frame in place: ECN-CE, or trimmed to its headers with a
// trimmed DSCP (as a switch would), fixing the IP header.
inline void fix_ipv4_csum(std::vector<uint8_t>& f) {
  f[24] = f[25] = 0;
  uint32_t s = 0;
  for (int i = 0; i < 20; i += 2) s += uint32_t(f[14 + i] << 8 | f[15 + i]);
  while (s >> 16) s = (s & 0xffff) + (s >> 16);
  f[24] = uint8_t(~s >> 8), f[25] = uint8_t(~s);
}
inline void set_ecn_ce(std::vector<uint8_t>& f) {
  if ((f[14] >> 4) == 4) {
    f[15] |= 3;
    fix_ipv4_csum(f);
  } else {
    f[15] |= 0x30;
  }
}
inline void trim_frame(std::vector<uint8_t>& f, uint8_t dscp) {
  codec::Packet p;
  codec::CodecConfig c;
  if (codec::parse(f, c, p) != codec::ParseError::kOk) return;
  size_t keep = p.bth_off + 12 + codec::ext_header_len(p.bth.opcode, p.bth.ts);
  f.resize(keep);
  if ((f[14] >> 4) == 4) {
    f[16] = uint8_t((keep - 14) >> 8), f[17] = uint8_t(keep - 14);
    f[15] = uint8_t(dscp << 2 | (f[15] & 3));
    f[38] = uint8_t((keep - 34) >> 8), f[39] = uint8_t(keep - 34);
    fix_ipv4_csum(f);
  } else {
    f[18] = uint8_t((keep - 54) >> 8), f[19] = uint8_t(keep - 54);
    f[58] = f[18], f[59] = f[19];
    f[14] = uint8_t(0x60 | dscp >> 2);
    f[15] = uint8_t((dscp & 3) << 6 | (f[15] & 0x3f));
  }
}

class Host {
 public:
  using AddrFn = std::function<codec::IpAddr(int host, int plane, codec::IpVersion v)>;
  Host(int idx, int planes, codec::IpVersion v, uint64_t seed, core::EngineConfig base = {},
       const AddrFn& addr = {})
      : idx_(idx) {
    core::EngineConfig c = base;
    c.seed = seed;
    if (!c.id_seed) c.id_seed = seed;  // reproducible QPNs and keys
    c.ports.clear();
    for (int p = 1; p <= planes; p++)
      c.ports.push_back(
          {uint8_t(p), host_mac(idx, p), addr ? addr(idx, p, v) : host_ip(idx, p, v), true});
    eng = std::make_unique<core::Engine>(c);
    pd = *eng->create_pd();
    scq = *eng->create_cq(65536);
    rcq = *eng->create_cq(65536);
  }
  std::unique_ptr<core::Engine> eng;
  uint32_t pd = 0, scq = 0, rcq = 0;
  int idx_;
};

struct PairOptions {
  int planes = 4;
  codec::IpVersion ver = codec::IpVersion::kV4;
  Time latency = 5'000;  // one way, ns
  double gbps = 0;       // per plane and direction, 0 = unlimited
  uint64_t seed = 1;
  core::EngineConfig cfg;
  // QP attributes
  uint32_t mtu = 1024;
  uint8_t mpr = 8, mpr_dest = 8;
  uint16_t max_wimm = 64, max_wimm_dest = 64;
  uint8_t timeout = 10, retry_linear = 7, retry_exp = 7;
  uint64_t ev_profile = 0, cc_profile = 0;
  uint32_t cap_flags = 0;
  bool peer_wimm_known = true;  // tell the requester the peer's max_wimm_dest
  Host::AddrFn addr;            // host addresses (default host_ip())
  uint32_t access = core::kAccessRemoteWrite | core::kAccessLocalWrite;
  // A transmit that takes time on host 0, as libmrc's live frames do (host
  // 1's is instant): frames leave in submissions of `submit_every` frames, each `submit_cost` after
  // the one before (the first at the pass's time plus submit_cost), and the engine hears of each
  // (Engine::tx_done) when it returns, as DeviceTxSink tells it; `hold_at_pass_end`: only once,
  // when the pass's last submission returns (an engine loop that does not know when its frames
  // left). 0: every frame leaves at its commit and tx_done is never called.
  uint32_t submit_every = 0;
  Time submit_cost = 0;
  bool hold_at_pass_end = false;
};

// A wire hook for Pair::hook: the hosts' threads sleep and wake. Half the
// frames find the receiving thread awake; the rest wait `wait_min` to
// `wait_min + wait_spread` (50-250 us by default) for it, in order per host
// (a frame that waits holds back the ones behind it, as a sleeping thread
// does), stamped on arrival as XDP stamps them. `latency` is the harness's
// one-way latency.
inline auto host_wakeups(uint64_t seed, core::Time latency = 5'000, core::Time wait_min = 50'000,
                         uint32_t wait_spread = 200'000) {
  return [r = core::Rng(seed), last = std::array<core::Time, 2>{}, latency, wait_min, wait_spread](
             int from, uint8_t, std::vector<uint8_t>&, core::Time now) mutable {
    const int to = 1 - from;
    const core::Time arrive = now + latency;
    const core::Time wake = r.below(2) == 0 ? 0 : wait_min + r.below(wait_spread);
    const core::Time at = std::max(arrive + wake, last[size_t(to)]);
    last[size_t(to)] = at;
    Hook h;
    h.extra_delay = at - arrive;
    h.host_wait = h.extra_delay;
    return h;
  };
}

class Pair {
 public:
  using Options = PairOptions;

  explicit Pair(Options o = Options()) : o_(o) {
    for (int h = 0; h < 2; h++)
      hosts.push_back(std::make_unique<Host>(h, o.planes, o.ver, o.seed * 2 + h, o.cfg, o.addr));
  }

  Host& h(int i) { return *hosts[i]; }
  core::Engine& e(int i) { return *hosts[i]->eng; }

  // Creates a connected QP pair: qp[0] on host 0 talks to qp[1] on host 1.
  std::pair<uint32_t, uint32_t> connect(uint32_t psn0 = 0, uint32_t psn1 = 0) {
    uint32_t q[2];
    for (int i = 0; i < 2; i++) {
      core::QpInitAttr ia;
      ia.pd = h(i).pd;
      ia.send_cq = h(i).scq;
      ia.recv_cq = h(i).rcq;
      ia.cap.max_send_wr = 1024;
      ia.cap.max_recv_wr = 1024;
      auto r = e(i).create_qp(ia);
      EXPECT_TRUE(r.ok()) << r.error().message();
      q[i] = *r;
    }
    for (int i = 0; i < 2; i++) {
      EXPECT_TRUE(to_init(i, q[i]).ok());
      EXPECT_TRUE(to_rtr(i, q[i], q[1 - i], i == 0 ? psn1 : psn0).ok());
      EXPECT_TRUE(to_rts(i, q[i], i == 0 ? psn0 : psn1).ok());
    }
    return {q[0], q[1]};
  }

  mrc::Status to_init(int i, uint32_t qpn) {
    core::QpAttr a;
    a.qp_state = core::QpState::kInit;
    a.qp_access_flags = o_.access;
    a.ev_profile_id = o_.ev_profile;
    a.cc_profile_id = o_.cc_profile;
    return e(i).modify_qp(qpn, a, core::kQpState | core::kQpPkeyIndex | core::kQpAccessFlags,
                          core::kMrcHint | core::kMrcEvProfileId | core::kMrcCcProfileId);
  }
  core::QpAttr rtr_attr(int i, uint32_t remote_qpn, uint32_t rq_psn) {
    core::QpAttr a;
    a.qp_state = core::QpState::kRtr;
    a.path_mtu = o_.mtu;
    a.dest_qp_num = remote_qpn;
    a.rq_psn = rq_psn;
    for (int p = 1; p <= o_.planes; p++)
      a.av[size_t(p)] = {o_.addr ? o_.addr(1 - i, p, o_.ver) : host_ip(1 - i, p, o_.ver),
                         host_mac(1 - i, p), true};
    a.max_wimm_dest = o_.max_wimm_dest;
    a.mpr_dest = o_.mpr_dest;
    a.cap_flags = o_.cap_flags;
    a.peer_max_wimm_dest = o_.peer_wimm_known ? o_.max_wimm_dest : 0;
    return a;
  }
  mrc::Status to_rtr(int i, uint32_t qpn, uint32_t remote_qpn, uint32_t rq_psn) {
    return e(i).modify_qp(
        qpn, rtr_attr(i, remote_qpn, rq_psn),
        core::kQpState | core::kQpAv | core::kQpPathMtu | core::kQpDestQpn | core::kQpRqPsn,
        core::kMrcMaxWimmDest | core::kMrcMprDest | core::kMrcCap);
  }
  mrc::Status to_rts(int i, uint32_t qpn, uint32_t sq_psn) {
    core::QpAttr a;
    a.qp_state = core::QpState::kRts;
    a.sq_psn = sq_psn;
    a.max_wimm = o_.max_wimm;
    a.mpr = o_.mpr;
    a.timeout = o_.timeout;
    a.retry_linear = o_.retry_linear;
    a.retry_exp = o_.retry_exp;
    return e(i).modify_qp(
        qpn, a, core::kQpState | core::kQpSqPsn,
        core::kMrcMaxWimm | core::kMrcMpr | core::kMrcRetryCnt | core::kMrcTimeout);
  }

  // The wire hook sees every frame (from host, on plane port) before delivery.
  std::function<Hook(int from, uint8_t port, std::vector<uint8_t>& frame, Time now)> hook;
  // Planes that drop everything (both directions).
  uint32_t dead_planes = 0;

  // Advances time until `done()` or `limit` ns of virtual time pass.
  bool run(const std::function<bool()>& done, Time limit = 2'000'000'000) {
    const Time stop = now + limit;
    while (now <= stop) {
      if (done()) return true;
      pump();
      // What this step delivered may be what we wait for: do not jump to
      // the next deadline first (time would be overstated).
      if (done()) return true;
      Time next = stop + 1;
      if (!flight.empty()) next = std::min(next, flight.begin()->first);
      for (int i = 0; i < 2; i++) {
        Time d = e(i).next_deadline();
        if (d != core::kNever) next = std::min(next, std::max(d, now + 1));
        if (e(i).tx_ready()) next = std::min(next, tx_room_at(i));
      }
      if (next > stop) {
        if (done()) return true;
        return false;
      }
      now = std::max(now + 1, next);
    }
    return done();
  }

  // When host i, with frames ready, can next transmit: in 1 us while one of
  // its planes has room; on rate-limited planes whose transmitters are all
  // more than a frame time behind, when the first of them has room again
  // (Sink::alloc refuses every frame before that, so no step is skipped).
  Time tx_room_at(int i) const {
    Time at = now + 1000;
    if (o_.gbps <= 0) return at;
    Time first_room = core::kNever;
    for (int port = 1; port <= o_.planes; port++)
      first_room =
          std::min(first_room, busy_until[i][port] > 20'000 ? busy_until[i][port] - 20'000 : 0);
    return std::max(at, first_room);
  }

  // One step at the current time: deliver what is due, then transmit.
  void pump() {
    if (rx_burst > 1) {
      // Like a driver: every frame due now, up to rx_burst per rx() call and host.
      for (int to = 0; to < 2; to++) {
        std::vector<WireFrame> due;
        for (auto it = flight.begin(); it != flight.end() && it->first <= now;) {
          if (it->second.to == to) {
            due.push_back(std::move(it->second));
            it = flight.erase(it);
          } else {
            ++it;
          }
        }
        for (size_t i = 0; i < due.size(); i += rx_burst) {
          std::vector<core::RxFrame> rf;
          for (size_t j = i; j < std::min(due.size(), i + rx_burst); j++)
            rf.push_back({due[j].bytes.data(), uint32_t(due[j].bytes.size()), due[j].port,
                          due[j].arrived ? due[j].arrived : now});
          e(to).rx(rf, now);
          rx_calls[to]++;
          frames_delivered += rf.size();
        }
      }
    }
    while (!flight.empty() && flight.begin()->first <= now) {
      auto it = flight.begin();
      WireFrame f = std::move(it->second);
      flight.erase(it);
      core::RxFrame rf{f.bytes.data(), uint32_t(f.bytes.size()), f.port,
                       f.arrived ? f.arrived : now};
      // Multi-buffer delivery: every buffer its own allocation, so a read
      // past one (in the codec or the engine) is caught by ASan.
      std::vector<std::vector<uint8_t>> bufs;
      std::vector<codec::FrameSeg> segs;
      if (rx_segment && f.bytes.size() > rx_segment) {
        for (size_t off = 0; off < f.bytes.size(); off += rx_segment)
          bufs.emplace_back(f.bytes.begin() + off,
                            f.bytes.begin() + std::min(f.bytes.size(), off + rx_segment));
        for (size_t i = 1; i < bufs.size(); i++)
          segs.push_back({bufs[i].data(), uint32_t(bufs[i].size())});
        rf.data = bufs[0].data();
        rf.len = uint32_t(bufs[0].size());
        rf.more = segs;
        frames_segmented++;
      }
      e(f.to).rx({&rf, 1}, now);
      rx_calls[f.to]++;
      frames_delivered++;
    }
    for (int i = 0; i < 2; i++) {
      Sink s(*this, i);
      for (int k = 0; k < 64; k++)
        if (!e(i).tx(s, now, 64)) break;
      s.finish();
    }
  }

  size_t poll(int host, uint32_t cq, std::vector<core::Wc>& out) {
    core::Wc wc[64];
    size_t total = 0;
    while (true) {
      auto r = e(host).poll_cq(cq, wc);
      if (!r.ok() || *r == 0) break;
      out.insert(out.end(), wc, wc + *r);
      total += *r;
    }
    return total;
  }

  Time now = 0;
  std::vector<std::unique_ptr<Host>> hosts;
  std::multimap<Time, WireFrame> flight;
  uint64_t frames_sent = 0, frames_delivered = 0, frames_dropped = 0;
  size_t rx_burst = 1;  // frames per rx() call, as a driver's burst
  // Bytes per receive buffer (rx_burst 1 only): a larger frame reaches the
  // engine as a multi-buffer frame (RxFrame::more), as multi-buffer AF_XDP
  // delivers it. 0: whole frames.
  uint32_t rx_segment = 0;
  uint64_t frames_segmented = 0;
  uint64_t rx_calls[2] = {};
  uint64_t frames_per_plane[17] = {};
  Time busy_until[2][17] = {};

 private:
  struct Sink : core::TxSink {
    Sink(Pair& p, int from) : p(p), from(from) {}
    uint8_t* alloc(uint8_t port, uint32_t* cap) override {
      // A rate-limited plane has room for one more frame only when its
      // transmitter is at most one frame time behind.
      if (p.o_.gbps > 0 && p.busy_until[from][port] > p.now + 20'000) return nullptr;
      buf.resize(std::max<size_t>(9216, p.o_.mtu + 128));
      *cap = uint32_t(buf.size());
      (void)port;
      return buf.data();
    }
    void commit(uint8_t port, uint32_t len) override {
      if (!len) return;
      std::vector<uint8_t> f(buf.begin(), buf.begin() + len);
      p.frames_sent++;
      p.frames_per_plane[port]++;
      Time depart = p.now;
      if (p.o_.gbps > 0) {
        Time& busy = p.busy_until[from][port];
        busy = std::max(busy, p.now) + Time(double(len) * 8 / p.o_.gbps);
        depart = busy;
      }
      Hook h;
      if (p.hook) h = p.hook(from, port, f, p.now);
      if (h.drop || (p.dead_planes >> port & 1)) {
        p.frames_dropped++;
        return;
      }
      const Time at = depart + p.o_.latency + h.extra_delay;
      const Time arrived = h.host_wait ? at - std::min(h.host_wait, at) : 0;
      if (p.o_.submit_every && from == 0) {  // leaves with its submission
        if (h.dup) held.emplace_back(at + 1, WireFrame{1 - from, port, f, arrived});
        held.emplace_back(at, WireFrame{1 - from, port, std::move(f), arrived});
        if (++staged == p.o_.submit_every) submit();
        return;
      }
      if (h.dup) p.flight.emplace(at + 1, WireFrame{1 - from, port, f, arrived});
      p.flight.emplace(at, WireFrame{1 - from, port, std::move(f), arrived});
    }
    void submit() {
      spent += p.o_.submit_cost;
      for (auto& [at, w] : held) {
        if (w.arrived) w.arrived += spent;
        p.flight.emplace(at + spent, std::move(w));
      }
      held.clear();
      staged = 0;
      if (!p.o_.hold_at_pass_end) p.e(from).tx_done(p.now + spent);
    }
    // The end of the pass: what is staged leaves.
    void finish() {
      if (!p.o_.submit_every || from != 0) return;
      if (staged) submit();
      if (p.o_.hold_at_pass_end && spent) p.e(from).tx_done(p.now + spent);
    }
    Pair& p;
    int from;
    std::vector<uint8_t> buf;
    std::vector<std::pair<Time, WireFrame>> held;
    uint32_t staged = 0;
    Time spent = 0;
  };
  Options o_;
};

// Registered memory with a recognisable pattern.
struct Buffer {
  std::vector<uint8_t> bytes;
  core::Engine::MrInfo mr{};
  Buffer(core::Engine& e, uint32_t pd, size_t n, uint8_t seed, uint32_t access) : bytes(n) {
    for (size_t i = 0; i < n; i++) bytes[i] = uint8_t(i * 131 + seed * 7 + (i >> 9));
    auto r = e.reg_mr(pd, bytes.data(), n, access);
    EXPECT_TRUE(r.ok());
    mr = *r;
  }
  uint64_t addr(size_t off = 0) { return uint64_t(uintptr_t(bytes.data() + off)); }
};

// Posts an RDMA WRITE of `len` bytes at `off` of src to the same offset of
// dst on QP `qpn` of engine `e`.
inline mrc::Status post_write(core::Engine& e, uint32_t qpn, Buffer& src, Buffer& dst, size_t off,
                              size_t len, uint64_t wr_id) {
  core::Sge sg{src.addr(off), uint32_t(len), src.mr.lkey};
  core::SendWr wr;
  wr.wr_id = wr_id;
  wr.opcode = core::WrOpcode::kRdmaWrite;
  wr.sg_list = &sg;
  wr.num_sge = 1;
  wr.remote_addr = dst.addr(off);
  wr.rkey = dst.mr.rkey;
  return e.post_send(qpn, wr);
}

inline codec::Packet parse_or_die(const std::vector<uint8_t>& f) {
  codec::Packet p;
  codec::CodecConfig c;
  EXPECT_EQ(codec::parse(f, c, p), codec::ParseError::kOk);
  return p;
}

}  // namespace mrc::testing
