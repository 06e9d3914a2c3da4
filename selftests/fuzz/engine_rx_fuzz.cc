// libFuzzer target on Engine::rx(): packets with valid framing and ICRC and
// fuzzed fields, against a QP in every state.
//
// Each input builds two fresh engines, A and B, over two planes (IPv4 or
// IPv6, TSETH on or off), and brings A's QP to the scenario's state (RESET,
// INIT, RTR, RTS as a requester with WRITE and WRITE-with-immediate work in
// flight, RTS as a responder, ERR); B's QP is connected to A's, in RTS with
// receives posted. The rest of the input is a sequence of steps:
//   - a packet built with codec::build() (valid framing and ICRC) whose
//     fields come from the input: any MRC opcode, the real QPN or another,
//     PSNs around the QP's windows (small and huge offsets), the real rkey or
//     one with a bit flipped, addresses around the registered regions, SACK
//     and NACK fields, AETH syndromes, endpoint operations; optionally
//     trimmed to its headers (as a switch would), mutated after the ICRC, or
//     delivered as a multi-buffer frame;
//   - raw bytes, for the parser;
//   - Engine::tx() on both engines, optionally delivering what each sent to
//     the other (so the real protocol moves);
//   - the virtual clock advancing (so timers run);
//   - more work posted.
// Everything is deterministic per input (fixed engine seeds, virtual time).
//
// Properties, beyond ASan and UBSan (a violation aborts):
//   - every frame the engines emit parses;
//   - completions: never more than posted, every wr_id one we posted and
//     completed once, on the right QP;
//   - guard bytes around a registered region are never written (the other
//     regions are exact-size heap allocations, for ASan);
//   - EngineStats::rx_frames counts every frame fed;
//   - with MRC_FUZZ_GHOST_PROPERTY (the target engine_rx_fuzz; off in
//     engine_rx_fuzz_basic): a GHOST packet never moves its QP to ERR
//     (security.md, issue 20: "a forged, stale or replayed packet costs a
//     counter, never a QP"). A ghost is an acknowledgement (SACK, NACK of any
//     reason, AETH ACK/NAK) naming a PSN the QP never sent (before its first
//     PSN, or at or beyond the next PSN it would send), or a data or trimmed
//     packet outside any window the responder can have had. And more widely:
//     one fuzzed packet moves a QP to ERR only as a confirmed refusal (an
//     AETH NAK or NACK UNEXP_EVENT of a PSN refused once before, so
//     refusals_retried does not grow) or by consuming the last receive
//     (imm_no_recv grows); a request that fails its access check, or a
//     WriteIMM beyond max_wimm_dest, never does.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <vector>

#include "codec/ev.hpp"
#include "codec/packet.hpp"
#include "core/engine.hpp"
#include "engine/addrs.hpp"

#ifndef MRC_FUZZ_GHOST_PROPERTY
#define MRC_FUZZ_GHOST_PROPERTY 1
#endif

namespace {

using namespace mrc;
using core::QpState;
using core::Time;
using testing::host_ip;
using testing::host_mac;

[[noreturn]] void violated(const char* what, const char* file, int line) {
  std::fprintf(stderr, "engine_rx_fuzz: property violated: %s (%s:%d)\n", what, file, line);
  std::abort();
}
#define FUZZ_CHECK(cond)                              \
  do {                                                \
    if (!(cond)) violated(#cond, __FILE__, __LINE__); \
  } while (0)

constexpr int kPlanes = 2;
constexpr uint32_t kMtu = 256;
constexpr uint8_t kMprDest = 8;
constexpr uint32_t kWindow = uint32_t(kMprDest) * 128;  // responder PSN window
constexpr size_t kMaxOut = 256;                         // frames kept for delivery per engine
constexpr int kMaxSteps = 64;
constexpr size_t kGuard = 64;
constexpr uint8_t kGuardByte = 0xa5;

const uint8_t kOpcodes[] = {
    MRC_OP_WRITE_FIRST, MRC_OP_WRITE_MIDDLE,   MRC_OP_WRITE_LAST, MRC_OP_WRITE_LAST_IMM,
    MRC_OP_WRITE_ONLY,  MRC_OP_WRITE_ONLY_IMM, MRC_OP_ACK,        MRC_OP_SACK,
    MRC_OP_NACK,        MRC_OP_PROBE,          MRC_OP_EP_REQUEST, MRC_OP_EP_RESPONSE};
const uint8_t kNackReasons[] = {
    MRC_NACK_TRIMMED,     MRC_NACK_TRIMMED_LASTHOP, MRC_NACK_NO_BITMAP,  MRC_NACK_NO_PKT_BUFFER,
    MRC_NACK_NO_RESOURCE, MRC_NACK_PSN_OOR_WINDOW,  MRC_NACK_UNEXP_EVENT};
// AETH: positive ACK, RNR NAK, the NAK codes (PSN sequence error, invalid
// request, remote access, remote operational, invalid RD request).
const uint8_t kSyndromes[] = {0x00, 0x1f, 0x20, 0x60, 0x61, 0x62, 0x63, 0x64};

const uint8_t* pattern() {
  static std::vector<uint8_t> p = [] {
    std::vector<uint8_t> v(70000);
    for (size_t i = 0; i < v.size(); i++) v[i] = uint8_t(i * 131 + (i >> 8));
    return v;
  }();
  return p.data();
}

// A registered region: an exact-size heap allocation (ASan flags any byte
// placed outside it), or, when guarded, the middle of a larger one whose
// guard bytes are checked instead.
struct Region {
  std::unique_ptr<uint8_t[]> block;
  size_t len = 0;
  bool guarded = false;
  core::Engine::MrInfo mr{};
  uint8_t* data() const { return block.get() + (guarded ? kGuard : 0); }
  uint64_t addr() const { return uint64_t(uintptr_t(data())); }
  void init(core::Engine& e, uint32_t pd, size_t n, bool guard, uint32_t access) {
    len = n;
    guarded = guard;
    const size_t total = n + (guard ? 2 * kGuard : 0);
    block.reset(new uint8_t[total]);
    std::memset(block.get(), kGuardByte, total);
    std::memcpy(data(), pattern(), n);
    auto r = e.reg_mr(pd, data(), n, access);
    FUZZ_CHECK(r.ok());
    mr = *r;
  }
  bool guards_intact() const {
    if (!guarded) return true;
    for (size_t i = 0; i < kGuard; i++)
      if (block[i] != kGuardByte || block[kGuard + len + i] != kGuardByte) return false;
    return true;
  }
};

struct Frame {
  uint8_t port;
  std::vector<uint8_t> bytes;
};

struct Side;

struct Sink : core::TxSink {
  explicit Sink(Side& s) : side(s) {}
  uint8_t* alloc(uint8_t port, uint32_t* cap) override {
    FUZZ_CHECK(port >= 1 && port <= kPlanes);
    *cap = uint32_t(sizeof(buf));
    return buf;
  }
  void commit(uint8_t port, uint32_t len) override;
  Side& side;
  uint8_t buf[9216];
};

// One engine and its QP, with what the fuzzer knows about it from outside.
struct Side {
  int idx = 0;
  std::unique_ptr<core::Engine> eng;
  uint32_t pd = 0, scq = 0, rcq = 0, qpn = 0;
  uint32_t sq0 = 0;       // first PSN the QP sends
  uint32_t next_psn = 0;  // first PSN it has not sent yet (from its output)
  uint32_t una_est = 0;   // above the highest cumulative ack it was sent
  uint32_t rq0 = 0;       // first PSN it expects
  uint64_t data_in =
      0;               // data packets for its QP that parsed (upper bound on its window's advance)
  uint32_t rx_hi = 0;  // highest in-window PSN offset fed, + 1
  uint64_t rx_fed = 0;
  std::map<uint32_t, uint16_t> sent_ts;  // PSN -> TSETH tx_ts of its last transmission
  std::vector<uint32_t> evs;             // entropies seen on its data packets
  std::vector<Frame> out;
  // work
  std::vector<uint64_t> send_ids, recv_ids;  // posted
  std::vector<uint8_t> send_done, recv_done;
  uint64_t sends_done = 0, recvs_done = 0;
  Region regions[2];  // [0]: exact-size, [1]: guarded
};

void Sink::commit(uint8_t port, uint32_t len) {
  FUZZ_CHECK(len <= sizeof(buf));
  if (!len) return;
  // Every frame an engine emits must parse.
  codec::Packet p;
  codec::CodecConfig cfg;
  FUZZ_CHECK(codec::parse({buf, len}, cfg, p) == codec::ParseError::kOk);
  if (codec::is_data_opcode(p.bth.opcode) && p.trim == codec::TrimKind::kNone) {
    if (codec::psn_diff(codec::psn_add(p.bth.psn, 1), side.next_psn) > 0)
      side.next_psn = codec::psn_add(p.bth.psn, 1);
    if (p.bth.ts) side.sent_ts[p.bth.psn] = p.tseth.tx_ts;
    if (side.evs.size() < 16)
      side.evs.push_back(codec::ev_from_wire(p.ip, p.udp, codec::EvFmtMode::kStev));
  }
  if (side.out.size() >= kMaxOut) side.out.erase(side.out.begin());
  side.out.push_back({port, std::vector<uint8_t>(buf, buf + len)});
}

struct World {
  Side s[2];
  Time now = 1'000'000;
  codec::IpVersion ver = codec::IpVersion::kV4;
  bool tseth = true;
  int scenario = 0;
};

QpState qp_state(const Side& s) {
  auto a = s.eng->query_qp(s.qpn);
  FUZZ_CHECK(a.ok());
  return a->qp_state;
}

void drain_cqs(Side& s) {
  core::Wc wc[16];
  for (int which = 0; which < 2; which++) {
    const bool send = which == 0;
    while (true) {
      auto r = s.eng->poll_cq(send ? s.scq : s.rcq, wc);
      FUZZ_CHECK(r.ok());
      FUZZ_CHECK(*r <= 16);
      if (!*r) break;
      for (size_t i = 0; i < *r; i++) {
        FUZZ_CHECK(wc[i].qp_num == s.qpn);
        const auto& ids = send ? s.send_ids : s.recv_ids;
        auto& done = send ? s.send_done : s.recv_done;
        size_t k = 0;
        while (k < ids.size() && ids[k] != wc[i].wr_id) k++;
        FUZZ_CHECK(k < ids.size());  // a wr_id we posted
        FUZZ_CHECK(!done[k]);        // completed once
        done[k] = 1;
        (send ? s.sends_done : s.recvs_done)++;
      }
      FUZZ_CHECK(s.sends_done <= s.send_ids.size());
      FUZZ_CHECK(s.recvs_done <= s.recv_ids.size());
    }
  }
}

void check_side(Side& s) {
  drain_cqs(s);
  for (const Region& r : s.regions) FUZZ_CHECK(r.guards_intact());
  FUZZ_CHECK(s.eng->stats().rx_frames == s.rx_fed);
  uint64_t errs = s.eng->stats().rx_not_mrc;
  for (uint64_t e : s.eng->stats().rx_parse_errors) errs += e;
  FUZZ_CHECK(errs <= s.rx_fed);
}

// Is `p` (parsed, for QP s.qpn in state st) a ghost for that QP?
bool is_ghost(const Side& s, const codec::Packet& p, QpState st) {
  if (p.bth.dqpn != s.qpn) return false;
  const uint8_t op = p.bth.opcode;
  auto never_sent = [&](uint32_t psn) {
    return codec::psn_diff(psn, s.sq0) < 0 || codec::psn_diff(psn, s.next_psn) >= 0;
  };
  if (st == QpState::kRts) {
    if (op == MRC_OP_SACK) {
      // Acknowledges through cack_psn: a ghost if that takes in a PSN never
      // sent, or lies below the PSN before the first one.
      return codec::psn_diff(p.seth.cack_psn, codec::psn_add(s.sq0, -1)) < 0 ||
             codec::psn_diff(p.seth.cack_psn, s.next_psn) >= 0;
    }
    if (op == MRC_OP_NACK) return never_sent(p.neth.nack_psn);
    if (op == MRC_OP_ACK) return never_sent(p.bth.psn);
  }
  if ((st == QpState::kRtr || st == QpState::kRts) && codec::is_data_opcode(op)) {
    // The window starts at or above rq0 and advanced by at most one PSN per
    // data packet fed.
    const int32_t off = codec::psn_diff(p.bth.psn, s.rq0);
    return off < 0 || uint64_t(off) >= s.data_in + kWindow;
  }
  return false;
}

// Feeds one frame to side `to`'s engine; `fuzzed` marks frames the fuzzer
// made (the ghost property is about those).
void feed(World& w, int to, const uint8_t* data, size_t len, uint8_t port, bool fuzzed,
          bool split) {
  Side& s = w.s[to];
  codec::Packet p;
  codec::CodecConfig cfg;
  const bool parsed = codec::parse({data, len}, cfg, p) == codec::ParseError::kOk;
  const QpState before = qp_state(s);
  const bool ghost = parsed && fuzzed && is_ghost(s, p, before);
  const core::QpStats st0 = *s.eng->qp_stats(s.qpn);
  if (parsed && p.bth.dqpn == s.qpn && codec::is_data_opcode(p.bth.opcode)) {
    s.data_in++;
    const int32_t off = codec::psn_diff(p.bth.psn, s.rq0);
    if (off >= 0 && uint32_t(off) + 1 > s.rx_hi && uint32_t(off) < s.rx_hi + kWindow)
      s.rx_hi = uint32_t(off) + 1;
  }
  if (parsed && !fuzzed && p.bth.dqpn == s.qpn && p.bth.opcode == MRC_OP_SACK) {
    const uint32_t upto = codec::psn_add(p.seth.cack_psn, 1);
    if (codec::psn_diff(upto, s.una_est) > 0 && codec::psn_diff(upto, s.next_psn) <= 0)
      s.una_est = upto;
  }
  // The frame in exactly sized heap buffers: ASan catches any read past one.
  std::vector<std::unique_ptr<uint8_t[]>> bufs;
  std::vector<codec::FrameSeg> segs;
  core::RxFrame rf;
  rf.port = port;
  rf.rx_ts = 0;
  const size_t seg =
      split && len > codec::kMinFirstSeg + 1 ? codec::kMinFirstSeg + (len % 61) : len;
  for (size_t off = 0; off < len || off == 0; off += seg) {
    const size_t n = std::min(seg, len - off);
    bufs.emplace_back(new uint8_t[n ? n : 1]);
    if (n) std::memcpy(bufs.back().get(), data + off, n);
    if (off == 0) {
      rf.data = bufs.back().get();
      rf.len = uint32_t(n);
    } else {
      segs.push_back({bufs.back().get(), uint32_t(n)});
    }
    if (!n) break;
  }
  rf.more = segs;
  s.eng->rx({&rf, 1}, w.now);
  s.rx_fed++;
  if (MRC_FUZZ_GHOST_PROPERTY && ghost && before != QpState::kErr && qp_state(s) == QpState::kErr) {
    std::fprintf(
        stderr,
        "engine_rx_fuzz: ghost %.*s to QP %u of engine %c moved it %s -> ERR: bth.psn %u, "
        "AETH syndrome 0x%02x, NACK reason 0x%02x psn %u, SACK cack %u, data %s; the QP sent "
        "[%u, %u), expects from %u (window %u, %llu data packets fed)\n",
        int(codec::opcode_info(p.bth.opcode)->name.size()),
        codec::opcode_info(p.bth.opcode)->name.data(), s.qpn, "AB"[to], core::to_string(before),
        p.bth.psn, p.aeth.syndrome, p.neth.reason, p.neth.nack_psn, p.seth.cack_psn,
        codec::is_data_opcode(p.bth.opcode) ? "yes" : "no", s.sq0, s.next_psn, s.rq0, kWindow,
        (unsigned long long)s.data_in);
    violated("a ghost packet never moves its QP to ERR", __FILE__, __LINE__);
  }
  if (MRC_FUZZ_GHOST_PROPERTY && fuzzed && before != QpState::kErr &&
      qp_state(s) == QpState::kErr) {
    const core::QpStats st1 = *s.eng->qp_stats(s.qpn);
    const bool refusal =
        parsed && (p.bth.opcode == MRC_OP_ACK ||
                   (p.bth.opcode == MRC_OP_NACK && p.neth.reason == MRC_NACK_UNEXP_EVENT));
    const bool confirmed = refusal && st1.refusals_retried == st0.refusals_retried;
    const bool no_recv = st1.imm_no_recv > st0.imm_no_recv;
    if (!confirmed && !no_recv) {
      std::fprintf(
          stderr,
          "engine_rx_fuzz: one fuzzed packet (opcode 0x%02x, psn %u) moved QP %u of engine %c "
          "%s -> ERR: neither a confirmed refusal nor a WriteIMM without a receive "
          "(access errors %llu -> %llu, over limit %llu -> %llu)\n",
          parsed ? p.bth.opcode : 0, parsed ? p.bth.psn : 0, s.qpn, "AB"[to],
          core::to_string(before), (unsigned long long)st0.rem_access_errors,
          (unsigned long long)st1.rem_access_errors, (unsigned long long)st0.imm_over_limit,
          (unsigned long long)st1.imm_over_limit);
      violated("one packet ends a QP only as a confirmed refusal or the last receive", __FILE__,
               __LINE__);
    }
  }
  check_side(s);
}

void run_tx(World& w, int i, size_t budget) {
  Sink sink(w.s[i]);
  for (int k = 0; k < 8; k++)
    if (!w.s[i].eng->tx(sink, w.now, budget)) break;
}

// Delivers up to n frames each engine sent to the other, oldest first.
void deliver(World& w, size_t n) {
  for (int from = 0; from < 2; from++) {
    Side& s = w.s[from];
    const size_t k = std::min(n, s.out.size());
    std::vector<Frame> batch(std::make_move_iterator(s.out.begin()),
                             std::make_move_iterator(s.out.begin() + k));
    s.out.erase(s.out.begin(), s.out.begin() + k);
    for (Frame& f : batch) feed(w, 1 - from, f.bytes.data(), f.bytes.size(), f.port, false, false);
  }
}

// --- setup ---------------------------------------------------------------

core::QpAttr rtr_attr(const World& w, int i, uint32_t remote_qpn, uint32_t rq_psn) {
  core::QpAttr a;
  a.qp_state = QpState::kRtr;
  a.path_mtu = kMtu;
  a.dest_qp_num = remote_qpn;
  a.rq_psn = rq_psn;
  for (int p = 1; p <= kPlanes; p++)
    a.av[size_t(p)] = {host_ip(1 - i, p, w.ver), host_mac(1 - i, p), true};
  a.max_wimm_dest = 4;
  a.mpr_dest = kMprDest;
  a.peer_max_wimm_dest = 4;
  return a;
}

void must(const Status& st, const char* what) {
  if (st.ok()) return;
  std::fprintf(stderr, "engine_rx_fuzz: %s: %s\n", what, st.error().message().c_str());
  violated("setup step succeeds", __FILE__, __LINE__);
}

void to_state(World& w, int i, QpState target) {
  Side& s = w.s[i];
  core::Engine& e = *s.eng;
  if (target == QpState::kReset) return;
  core::QpAttr a;
  a.qp_state = QpState::kInit;
  a.qp_access_flags = core::kAccessRemoteWrite | core::kAccessLocalWrite;
  must(e.modify_qp(s.qpn, a, core::kQpState | core::kQpPkeyIndex | core::kQpAccessFlags,
                   core::kMrcHint | core::kMrcEvProfileId | core::kMrcCcProfileId),
       "to INIT");
  if (target == QpState::kInit) return;
  must(e.modify_qp(
           s.qpn, rtr_attr(w, i, w.s[1 - i].qpn, s.rq0),
           core::kQpState | core::kQpAv | core::kQpPathMtu | core::kQpDestQpn | core::kQpRqPsn,
           core::kMrcMaxWimmDest | core::kMrcMprDest),
       "to RTR");
  if (target == QpState::kRtr) return;
  core::QpAttr r;
  r.qp_state = QpState::kRts;
  r.sq_psn = s.sq0;
  r.max_wimm = 4;
  r.mpr = kMprDest;
  r.timeout = 8;
  r.retry_linear = 3;
  r.retry_exp = 3;
  must(e.modify_qp(s.qpn, r, core::kQpState | core::kQpSqPsn,
                   core::kMrcMaxWimm | core::kMrcMpr | core::kMrcRetryCnt | core::kMrcTimeout),
       "to RTS");
}

void make_side(World& w, int i, uint32_t sq0, uint32_t rq0) {
  Side& s = w.s[i];
  s.idx = i;
  core::EngineConfig c;
  c.seed = uint64_t(0x6d7263) + uint64_t(i);
  c.tseth = w.tseth;
  c.auto_evs_per_port = 8;
  c.auto_active_per_port = 4;
  c.ev_event_capacity = 64;
  for (int p = 1; p <= kPlanes; p++)
    c.ports.push_back({uint8_t(p), host_mac(i, p), host_ip(i, p, w.ver), true});
  s.eng = std::make_unique<core::Engine>(c);
  s.pd = *s.eng->create_pd();
  s.scq = *s.eng->create_cq(256);
  s.rcq = *s.eng->create_cq(256);
  core::QpInitAttr ia;
  ia.pd = s.pd;
  ia.send_cq = s.scq;
  ia.recv_cq = s.rcq;
  ia.cap.max_send_wr = 16;
  ia.cap.max_recv_wr = 16;
  auto q = s.eng->create_qp(ia);
  FUZZ_CHECK(q.ok());
  s.qpn = *q;
  s.sq0 = s.next_psn = s.una_est = sq0;
  s.rq0 = rq0;
  const uint32_t rw = core::kAccessRemoteWrite | core::kAccessLocalWrite;
  s.regions[0].init(*s.eng, s.pd, i == 0 ? 2000 : 1536, false,
                    i == 0 ? uint32_t(core::kAccessLocalWrite) : rw);
  s.regions[1].init(*s.eng, s.pd, 1024, true, rw);
}

bool post_write(World& w, uint32_t len, bool imm, bool signaled, uint32_t dst_region,
                uint32_t dst_off) {
  Side& a = w.s[0];
  const Region& src = a.regions[0];
  const Region& dst = w.s[1].regions[dst_region & 1];
  len = std::min<uint32_t>(len, uint32_t(src.len));
  dst_off = dst_off % uint32_t(dst.len);
  len = std::min<uint32_t>(len, uint32_t(dst.len) - dst_off);
  core::Sge sg{src.addr(), len, src.mr.lkey};
  core::SendWr wr;
  wr.wr_id = 0x5000 + a.send_ids.size();
  wr.opcode = imm ? core::WrOpcode::kRdmaWriteWithImm : core::WrOpcode::kRdmaWrite;
  wr.send_flags = signaled ? uint32_t(core::kSendSignaled) : 0;
  wr.sg_list = &sg;
  wr.num_sge = 1;
  wr.remote_addr = dst.addr() + dst_off;
  wr.rkey = dst.mr.rkey;
  wr.imm_data = 0xabc0000 + uint32_t(a.send_ids.size());
  if (!a.eng->post_send(a.qpn, wr).ok()) return false;
  a.send_ids.push_back(wr.wr_id);
  a.send_done.push_back(0);
  return true;
}

bool post_recv(World& w, int i) {
  Side& s = w.s[i];
  core::RecvWr wr;
  wr.wr_id = 0x7000 + uint64_t(i) * 0x100 + s.recv_ids.size();
  if (!s.eng->post_recv(s.qpn, wr).ok()) return false;
  s.recv_ids.push_back(wr.wr_id);
  s.recv_done.push_back(0);
  return true;
}

uint32_t pick_initial_psn(FuzzedDataProvider& f) {
  switch (f.ConsumeIntegralInRange<int>(0, 3)) {
    case 0:
      return 0;
    case 1:
      return 0xfffff0;  // wraps within the first messages
    case 2:
      return 0x7ffffc;  // crosses the half-range point
    default:
      return f.ConsumeIntegral<uint32_t>() & MRC_PSN_MASK;
  }
}

void setup(World& w, FuzzedDataProvider& f) {
  const uint8_t h = f.ConsumeIntegral<uint8_t>();
  w.scenario = h % 6;
  w.ver = (h >> 3 & 1) ? codec::IpVersion::kV6 : codec::IpVersion::kV4;
  w.tseth = !(h >> 4 & 1);
  const uint32_t psn_a = pick_initial_psn(f), psn_b = pick_initial_psn(f);
  make_side(w, 0, psn_a, psn_b);
  make_side(w, 1, psn_b, psn_a);
  static const QpState kStates[] = {QpState::kReset, QpState::kInit, QpState::kRtr,
                                    QpState::kRts,   QpState::kRts,  QpState::kRts};
  to_state(w, 0, kStates[w.scenario]);
  to_state(w, 1, QpState::kRts);
  for (int k = 0; k < 4; k++) post_recv(w, 1);
  if (w.scenario >= 2) post_recv(w, 0);
  if (w.scenario == 3 || w.scenario == 5) {
    // Requester with WRITE and WRITE-with-immediate work outstanding.
    post_write(w, 600, false, true, 0, 0);
    post_write(w, 300, true, true, 1, 100);
    post_write(w, 1000, false, false, 0, 512);
    post_write(w, 200, true, true, 1, 0);
    run_tx(w, 0, 64);
  }
  if (w.scenario == 5) {
    core::QpAttr a;
    a.qp_state = QpState::kErr;
    FUZZ_CHECK(w.s[0].eng->modify_qp(w.s[0].qpn, a, core::kQpState, 0).ok());
  }
  check_side(w.s[0]);
  check_side(w.s[1]);
}

// --- packets ---------------------------------------------------------------

uint32_t pick_psn(FuzzedDataProvider& f, const Side& s, bool ack) {
  const uint8_t sel = f.ConsumeIntegral<uint8_t>();
  uint32_t b;
  if (ack) {
    const uint32_t bases[] = {s.una_est, s.next_psn, s.sq0, codec::psn_add(s.una_est, -1)};
    b = bases[sel & 3];
  } else {
    const uint32_t bases[] = {codec::psn_add(s.rq0, s.rx_hi), s.rq0,
                              codec::psn_add(s.rq0, int64_t(s.data_in)),
                              codec::psn_add(s.rq0, s.rx_hi + kWindow)};
    b = bases[sel & 3];
  }
  switch (sel >> 2 & 7) {
    case 0:
    case 1:
    case 2:
      return codec::psn_add(b, f.ConsumeIntegralInRange<int>(-8, 8));
    case 3:
      return codec::psn_add(b, f.ConsumeBool() ? int64_t(kWindow) : -int64_t(kWindow));
    case 4:
      return codec::psn_add(b, int64_t(1 << 23) + f.ConsumeIntegralInRange<int>(-2, 2));
    case 5:
      return f.ConsumeIntegral<uint32_t>() & MRC_PSN_MASK;
    case 6:
      return codec::psn_add(b, f.ConsumeIntegralInRange<int>(-300, 300));
    default:
      return b;
  }
}

uint32_t pick_entropy(FuzzedDataProvider& f, const Side& peer) {
  if (!peer.evs.empty() && f.ConsumeBool())
    return peer.evs[f.ConsumeIntegral<uint8_t>() % peer.evs.size()];
  return f.ConsumeIntegral<uint32_t>();
}

uint16_t pick_ts_echo(FuzzedDataProvider& f, const Side& s, uint32_t psn) {
  auto it = s.sent_ts.find(psn);
  if (it != s.sent_ts.end() && f.ConsumeIntegralInRange<int>(0, 3) != 0) return it->second;
  return f.ConsumeIntegral<uint16_t>();
}

void trim_frame(std::vector<uint8_t>& fr, uint8_t dscp) {
  codec::Packet p;
  codec::CodecConfig c;
  if (codec::parse(fr, c, p) != codec::ParseError::kOk) return;
  const size_t keep = p.bth_off + 12 + codec::ext_header_len(p.bth.opcode, p.bth.ts);
  fr.resize(keep);
  if ((fr[14] >> 4) == 4) {
    fr[16] = uint8_t((keep - 14) >> 8), fr[17] = uint8_t(keep - 14);
    fr[15] = uint8_t(dscp << 2 | (fr[15] & 3));
    fr[38] = uint8_t((keep - 34) >> 8), fr[39] = uint8_t(keep - 34);
    fr[24] = fr[25] = 0;
    uint32_t sum = 0;
    for (int i = 0; i < 20; i += 2) sum += uint32_t(fr[14 + i] << 8 | fr[15 + i]);
    while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
    fr[24] = uint8_t(~sum >> 8), fr[25] = uint8_t(~sum);
  } else {
    fr[18] = uint8_t((keep - 54) >> 8), fr[19] = uint8_t(keep - 54);
    fr[58] = fr[18], fr[59] = fr[19];
    fr[14] = uint8_t(0x60 | dscp >> 2);
    fr[15] = uint8_t((dscp & 3) << 6 | (fr[15] & 0x3f));
  }
}

// Builds a packet for side `to` from the input. Returns false if the
// description does not build (the step is then skipped).
bool craft(World& w, FuzzedDataProvider& f, int to, uint8_t port, std::vector<uint8_t>& frame) {
  const Side& s = w.s[to];
  const Side& peer = w.s[1 - to];
  codec::Packet p;
  const bool wrong_addr = f.ConsumeIntegralInRange<int>(0, 15) == 0;
  p.eth.dst = host_mac(to, port);
  p.eth.src = host_mac(1 - to, port);
  p.ip.src = host_ip(1 - to, wrong_addr ? 7 : port, w.ver);
  p.ip.dst = host_ip(to, port, w.ver);
  p.ip.ecn = uint8_t(f.ConsumeIntegralInRange<int>(0, 3));
  p.ip.flow_label = w.ver == codec::IpVersion::kV6 ? f.ConsumeIntegral<uint32_t>() & 0xfffff : 0;
  p.udp.sport = f.ConsumeIntegral<uint16_t>();
  const uint8_t osel = f.ConsumeIntegral<uint8_t>();
  const uint8_t op =
      osel == 0xff ? f.ConsumeIntegral<uint8_t>() : kOpcodes[osel % sizeof(kOpcodes)];
  p.bth.opcode = op;
  const bool data = codec::is_data_opcode(op);
  p.ip.dscp = data ? uint8_t(MRC_DSCP_TRIMMABLE_DEFAULT) : uint8_t(MRC_DSCP_CONTROL_DEFAULT);
  const uint8_t flags = f.ConsumeIntegral<uint8_t>();
  p.bth.se = flags & 1;
  p.bth.ack_req = flags & 2;
  p.bth.rtx = flags & 4;
  p.bth.ts = (data && w.tseth) ? !(flags & 8) : (flags & 0x88) == 0x88;
  const uint8_t qsel = f.ConsumeIntegralInRange<int>(0, 15);
  p.bth.dqpn = qsel < 13    ? s.qpn
               : qsel == 13 ? peer.qpn
               : qsel == 14 ? MRC_QPN_ENDPOINT
                            : f.ConsumeIntegral<uint32_t>() & MRC_QPN_MASK;
  p.bth.psn = pick_psn(f, s, !data);
  if (p.bth.ts) {
    p.tseth.tx_ts = f.ConsumeIntegral<uint16_t>();
    p.tseth.tsr = flags & 0x10;
  }
  std::vector<uint8_t> payload;
  if (data) {
    p.meth.msn = f.ConsumeIntegralInRange<uint16_t>(0, 6);
    p.meth.rqmsn = f.ConsumeIntegralInRange<uint16_t>(0, 6);
    // rkey: the real one of a region (of this side), a bit flipped, or random.
    const uint8_t ksel = f.ConsumeIntegral<uint8_t>();
    const Region& reg = s.regions[ksel & 1];
    p.reth.rkey = reg.mr.rkey;
    if ((ksel >> 1 & 7) == 0) p.reth.rkey ^= 1u << (ksel >> 4 & 15) << (ksel & 16);
    if ((ksel >> 1 & 15) == 1) p.reth.rkey = f.ConsumeIntegral<uint32_t>();
    if ((ksel >> 1 & 15) == 2) p.reth.rkey = peer.regions[0].mr.rkey;
    uint32_t plen = f.ConsumeIntegralInRange<uint32_t>(0, kMtu + 8);
    if (!codec::opcode_info(op)->last) plen &= ~3u;
    // The address: anywhere near the region, or a few bytes either side of
    // its start, of its end, or of where a packet of this length would end
    // at the end of the region (the boundaries a placement bug would cross).
    const uint64_t base = reg.addr(), len = reg.len;
    switch (f.ConsumeIntegralInRange<int>(0, 7)) {
      case 0:
        p.reth.va = f.ConsumeIntegral<uint64_t>();
        break;
      case 1:
      case 2:
        p.reth.va = base + uint64_t(f.ConsumeIntegralInRange<int64_t>(-64, int64_t(len) + 64));
        break;
      case 3:
      case 4:
        p.reth.va = base + len - plen + uint64_t(f.ConsumeIntegralInRange<int64_t>(-8, 8));
        break;
      case 5:
      case 6:
        p.reth.va = base + uint64_t(f.ConsumeIntegralInRange<int64_t>(-8, 8));
        break;
      default:
        p.reth.va = base + len + uint64_t(f.ConsumeIntegralInRange<int64_t>(-8, 8));
        break;
    }
    // The message length from this packet on (RETH): this packet's, up to
    // the region's end give or take a few bytes, longer, or anything.
    switch (f.ConsumeIntegralInRange<int>(0, 3)) {
      case 0:
        p.reth.dma_len = plen;
        break;
      case 1:
        p.reth.dma_len =
            uint32_t(base + len - p.reth.va + uint64_t(f.ConsumeIntegralInRange<int64_t>(-4, 4)));
        break;
      case 2:
        p.reth.dma_len = plen + f.ConsumeIntegralInRange<uint32_t>(0, 1024);
        break;
      default:
        p.reth.dma_len = f.ConsumeIntegral<uint32_t>();
        break;
    }
    p.imm = f.ConsumeIntegral<uint32_t>();
    payload.assign(pattern(), pattern() + plen);
    if (plen) payload[0] ^= f.ConsumeIntegral<uint8_t>();
    p.payload = payload.data();
    p.payload_len = plen;
  }
  switch (op) {
    case MRC_OP_ACK: {
      const uint8_t ss = f.ConsumeIntegral<uint8_t>();
      p.aeth.syndrome =
          ss < 224 ? kSyndromes[ss % sizeof(kSyndromes)] : f.ConsumeIntegral<uint8_t>();
      p.aeth.msn = f.ConsumeIntegral<uint32_t>() & 0xffffff;
      break;
    }
    case MRC_OP_SACK: {
      p.seth.verdict = uint8_t(f.ConsumeIntegralInRange<int>(0, 3));
      p.seth.probe_resp = f.ConsumeBool();
      p.seth.cack_psn = pick_psn(f, s, true);
      p.seth.ack_psn_offset = f.ConsumeIntegralInRange<int16_t>(-4, 64);
      p.seth.entropy = pick_entropy(f, s);
      p.seth.spdcid = uint16_t(peer.qpn), p.seth.dpdcid = uint16_t(s.qpn);
      p.seth.port_down_mask =
          f.ConsumeIntegralInRange<int>(0, 7) == 0 ? f.ConsumeIntegral<uint8_t>() : 0;
      p.seth.cc_type = f.ConsumeBool() ? MRC_CC_TYPE_NSCC : MRC_CC_TYPE_NONE;
      p.seth.cc_flags = f.ConsumeIntegral<uint8_t>() & 0xf;
      p.seth.mpr = f.ConsumeIntegralInRange<uint8_t>(0, 16);
      p.seth.sack_offset = f.ConsumeBool() ? f.ConsumeIntegralInRange<int16_t>(-70, 70)
                                           : f.ConsumeIntegral<int16_t>();
      p.seth.sack_bitmap = f.ConsumeIntegral<uint64_t>();
      p.cc.tx_ts_echo = pick_ts_echo(f, s, codec::psn_add(p.seth.cack_psn, p.seth.ack_psn_offset));
      p.cc.ooo_count = f.ConsumeIntegral<uint16_t>() & 0x7fff;
      p.cc.restore_cwnd = f.ConsumeBool();
      p.cc.rcv_cwnd_pen = f.ConsumeIntegral<uint8_t>() & 0x7f;
      p.cc.rcvd_bytes = f.ConsumeIntegral<uint32_t>() & 0xffffff;
      p.cc.has_svc = f.ConsumeBool();  // the service time: any value, even past the RTT
      if (p.cc.has_svc) p.cc.svc_time_ns = f.ConsumeIntegral<uint32_t>();
      break;
    }
    case MRC_OP_NACK: {
      const uint8_t rs = f.ConsumeIntegral<uint8_t>();
      p.neth.reason =
          rs < 240 ? kNackReasons[rs % sizeof(kNackReasons)] : f.ConsumeIntegral<uint8_t>();
      p.neth.vendor_info = f.ConsumeIntegral<uint8_t>();
      p.neth.entropy = pick_entropy(f, s);
      p.neth.spdcid = uint16_t(peer.qpn), p.neth.dpdcid = uint16_t(s.qpn);
      p.neth.nack_psn = pick_psn(f, s, true);
      p.neth.cc_type = f.ConsumeBool() ? MRC_CC_TYPE_NSCC : MRC_CC_TYPE_NONE;
      p.neth.cc_flags = f.ConsumeIntegral<uint8_t>() & 0xf;
      p.neth.tx_ts_echo = pick_ts_echo(f, s, p.neth.nack_psn);
      break;
    }
    case MRC_OP_PROBE:
      p.peth.probe_id = f.ConsumeIntegral<uint16_t>();
      p.peth.tx_ts = f.ConsumeIntegral<uint16_t>();
      p.peth.tsr = f.ConsumeBool();
      p.peth.ftype = f.ConsumeIntegral<uint8_t>() & 0xf;
      p.peth.spdcid = uint16_t(peer.qpn), p.peth.dpdcid = uint16_t(s.qpn);
      break;
    case MRC_OP_EP_REQUEST:
      if (qsel < 13) p.bth.dqpn = MRC_QPN_ENDPOINT;
      p.erth.op = f.ConsumeBool() ? MRC_EP_OP_EV_PROBE : MRC_EP_OP_PORT_STATUS_UPDATE;
      p.erth.req_id = f.ConsumeIntegral<uint16_t>();
      p.erth.port_status = f.ConsumeBool() ? 0x3 : f.ConsumeIntegral<uint32_t>();
      p.erth.tx_ts = f.ConsumeIntegral<uint16_t>();
      p.erth.entropy = f.ConsumeIntegral<uint32_t>();
      break;
    case MRC_OP_EP_RESPONSE:
      if (qsel < 13) p.bth.dqpn = MRC_QPN_ENDPOINT;
      p.eeth.op = f.ConsumeBool() ? MRC_EP_OP_EV_PROBE : MRC_EP_OP_PORT_STATUS_UPDATE;
      p.eeth.req_id = f.ConsumeIntegralInRange<uint16_t>(0, 4);
      p.eeth.port_status = f.ConsumeBool() ? 0x3 : f.ConsumeIntegral<uint32_t>();
      p.eeth.tx_ts_echo = f.ConsumeIntegral<uint16_t>();
      p.eeth.entropy = f.ConsumeIntegral<uint32_t>();
      p.eeth.rx_port = f.ConsumeIntegralInRange<uint8_t>(0, 3);
      p.eeth.flags = f.ConsumeIntegral<uint8_t>();
      p.eeth.svc_time_ns = f.ConsumeIntegral<uint32_t>();
      p.eeth.rsp_ts_ns = f.ConsumeIntegral<uint64_t>();
      break;
    default:
      break;
  }
  frame.resize(codec::frame_size(p) + 64);
  const size_t n = codec::build(p, frame);
  if (!n) return false;
  frame.resize(n);
  const uint8_t post = f.ConsumeIntegral<uint8_t>();
  if (data && (post & 7) == 1)
    trim_frame(frame, post & 8 ? MRC_DSCP_TRIMMED_LASTHOP_DEFAULT : MRC_DSCP_TRIMMED_DEFAULT);
  if ((post & 7) == 2) {
    // Mutated after the ICRC: the parser must refuse it or describe it.
    const int edits = 1 + (post >> 3 & 3);
    for (int e = 0; e < edits && !frame.empty(); e++) {
      const uint16_t at = f.ConsumeIntegral<uint16_t>();
      switch (f.ConsumeIntegralInRange<int>(0, 3)) {
        case 0:
          frame[at % frame.size()] ^= uint8_t(1u << (at >> 13));
          break;
        case 1:
          frame[at % frame.size()] = f.ConsumeIntegral<uint8_t>();
          break;
        case 2:
          frame.resize(at % (frame.size() + 1));
          break;
        default:
          frame.resize(frame.size() + at % 16, f.ConsumeIntegral<uint8_t>());
          break;
      }
    }
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider f(data, size);
  World w;
  setup(w, f);
  std::vector<uint8_t> frame;
  for (int step = 0; step < kMaxSteps && f.remaining_bytes() > 0; step++) {
    const uint8_t action = f.ConsumeIntegral<uint8_t>();
    // Which engine a packet goes to: mostly the QP under test (A), B when A
    // is the requester and the packet is data for the responder side.
    const int to = (action >> 4 & 3) == 0 ? 1 : ((w.scenario == 4 && (action >> 6 & 1)) ? 1 : 0);
    const uint8_t port = uint8_t(1 + (action >> 7 & 1));
    switch (action & 15) {
      case 0:
      case 1:
      case 2:
      case 3:
      case 4:
      case 5:
      case 6:
      case 7: {
        if (!craft(w, f, to, port, frame)) break;
        feed(w, to, frame.data(), frame.size(), port, true, (action & 15) == 7);
        break;
      }
      case 8: {  // raw bytes
        const size_t n = f.ConsumeIntegralInRange<size_t>(0, 400);
        frame = f.ConsumeBytes<uint8_t>(n);
        feed(w, to, frame.data(), frame.size(), port, true, false);
        break;
      }
      case 9:
      case 10:
      case 11: {  // tx, and deliver some of it
        run_tx(w, 0, 1 + (action >> 4));
        run_tx(w, 1, 1 + (action >> 4));
        if (action & 1) deliver(w, 1 + (action >> 5));
        break;
      }
      case 12:
      case 13: {  // time passes
        static const Time kSteps[] = {1,         1'000,     20'000,     100'000,
                                      1'000'000, 5'000'000, 50'000'000, 1'000'000'000};
        w.now += (action & 1) ? Time(f.ConsumeIntegral<uint32_t>()) : kSteps[action >> 5];
        run_tx(w, 0, 16);
        run_tx(w, 1, 16);
        break;
      }
      case 14: {  // more work
        if (action & 16)
          post_recv(w, (action >> 5) & 1);
        else
          post_write(w, f.ConsumeIntegralInRange<uint32_t>(1, 1200), action & 32, action & 64,
                     action >> 7, f.ConsumeIntegral<uint16_t>());
        check_side(w.s[0]);
        check_side(w.s[1]);
        break;
      }
      default: {  // deliver what is queued, then let time run out the timers
        deliver(w, kMaxOut);
        w.now += 2'000'000;
        run_tx(w, 0, 64);
        run_tx(w, 1, 64);
        deliver(w, kMaxOut);
        break;
      }
    }
  }
  check_side(w.s[0]);
  check_side(w.s[1]);
  return 0;
}
