// Responder: placement at the RETH address in any order, the PSN window,
// duplicates, access checks, WriteIMM completions in send order, SACK
// coalescing, trim NACKs, reliability probes, reverse-path port choice.
#include <algorithm>
#include <cstring>

#include "codec/ev.hpp"
#include "core/engine_impl.hpp"

namespace mrc::core {
namespace {
constexpr uint8_t kAethNakRemoteAccess = 0x62;  // IBTA AETH NAK code: remote access error
bool opcode_first(uint8_t op) {
  return op == MRC_OP_WRITE_FIRST || op == MRC_OP_WRITE_ONLY || op == MRC_OP_WRITE_ONLY_IMM;
}
}  // namespace

uint8_t Engine::reverse_port(Qp& q, uint8_t hint) {
  // Control packets rotate over the planes that work in both directions, so a
  // plane that loses them costs a fraction of the SACKs, never all.
  uint32_t ok = port_mask_for(q);
  if (!ok) return hint;
  // ... over those that delivered data lately (PathParams::sack_plane_gap),
  // except every eighth: a plane dead both ways is out of the rotation, and
  // one dead only towards us still gets a SACK now and then.
  if (const uint32_t gap = cfg_.paths.sack_plane_gap; gap && ++q.rev_count % 8) {
    uint32_t live = 0;
    for (uint32_t m = ok; m; m &= m - 1) {
      const unsigned p = unsigned(__builtin_ctz(m));
      if (q.rx_seq - q.rx_port_seq[p] <= gap) live |= 1u << p;
    }
    if (live) ok = live;
  }
  for (uint32_t k = 0; k < kMaxPorts; k++) {
    q.rev_rr = uint8_t(q.rev_rr % kMaxPorts + 1);
    if (ok >> q.rev_rr & 1) return q.rev_rr;
  }
  return hint;
}

void Engine::queue_sack(Qp& q, const Trigger& t, uint8_t verdict, bool probe_resp, bool ecn) {
  Ctrl c;
  c.kind = CtrlKind::kSack;
  c.qpn = q.qpn;
  c.port = reverse_port(q, t.port);
  c.psn = t.psn;
  c.entropy = t.entropy;
  c.ts_echo = t.ts;
  c.code = verdict;
  c.probe_resp = probe_resp;
  c.ecn = ecn || q.ce_owed;  // any SACK carries a mark it covers
  q.ce_owed = false;
  c.rx_ts = t.rx_ts;
  ctrl_->push(c);
  q.sack_deadline = kNever;
  q.unacked_bytes = 0;
  q.sack_due = false;
}

void Engine::queue_nack(Qp& q, uint32_t psn, uint8_t reason, uint32_t entropy, uint16_t ts_echo,
                        uint8_t port) {
  Ctrl c;
  c.kind = CtrlKind::kNack;
  c.qpn = q.qpn;
  c.port = reverse_port(q, port);
  c.psn = psn;
  c.entropy = entropy;
  c.ts_echo = ts_echo;
  c.code = reason;
  ctrl_->push(c);
}

void Engine::queue_aeth_nak(Qp& q, uint32_t psn, uint8_t syndrome, uint8_t port) {
  Ctrl c;
  c.kind = CtrlKind::kAethNak;
  c.qpn = q.qpn;
  c.port = reverse_port(q, port);
  c.psn = psn;
  c.code = syndrome;
  ctrl_->push(c);
}

void Engine::deliver_imm(Qp& q) {
  if (q.imm.empty()) return;
  const uint32_t mask = uint32_t(q.imm.size() - 1);
  const uint32_t cack = q.rwin.cack();
  while (true) {
    PendImm& e = q.imm[q.imm_next & mask];
    // In send order, and only once every earlier PSN has arrived.
    if (!e.known || codec::psn_lt(cack, e.last_psn)) return;
    if (!q.rq_count) {
      // MRC has no RNR: a WriteIMM without a posted receive is fatal. The
      // NACK names this message (its last PSN): every message before it
      // has completed here.
      q.stats.imm_no_recv++;
      q.acks_stopped = true;
      q.fail_nack = true;
      q.fail_psn = e.last_psn;
      queue_nack(q, e.last_psn, MRC_NACK_UNEXP_EVENT, 0, 0, q.last.port);
      to_error(q, kWcLocQpOpErr);
      return;
    }
    Wc wc;
    wc.wr_id = q.rq[q.rq_head];
    q.rq_head = uint32_t((q.rq_head + 1) % q.rq.size());
    q.rq_count--;
    wc.status = kWcSuccess;
    wc.opcode = WcOpcode::kRecvRdmaWithImm;
    wc.byte_len = q.msg_len[e.msn & (q.msg_len.size() - 1)];  // the FIRST/ONLY packet's length
    wc.imm_data = e.imm;
    wc.qp_num = q.qpn;
    wc.wc_flags = kWcWithImm;
    push_cqe(q.recv_cq, wc);
    q.stats.wimm_completions++;
    e.known = false;
    q.imm_next++;
    if (q.imm_span) q.imm_span--;
  }
}

void Engine::on_data(Qp& q, const codec::Packet& p, uint8_t port, Time rx_ts, Time now) {
  const uint32_t psn = p.bth.psn;
  Trigger trig;
  trig.rx_ts = rx_ts;
  trig.psn = psn;
  trig.entropy = codec::ev_from_wire(p.ip, p.udp, q.fmt);
  trig.ts = p.bth.ts ? p.tseth.tx_ts : 0;
  trig.port = port;
  trig.valid = true;
  if (port <= kMaxPorts) q.rev_ev[port] = trig.entropy;
  const bool ecn = p.ip.ecn == MRC_ECN_CE;
  q.stats.rx_data_pkts++;

  const int32_t d = codec::psn_diff(psn, q.rwin.next_expected());
  if (d < 0 || q.rwin.received(psn)) {
    // Duplicate: never placed twice, acknowledged at once.
    q.stats.rx_dup_pkts++;
    q.last = trig;
    queue_sack(q, trig, ecn ? MRC_MP_SKIP_ONCE : MRC_MP_NONE, false, ecn);
    return;
  }
  if (uint32_t(d) >= q.rwin.window()) {
    q.stats.rx_oor_pkts++;
    queue_nack(q, psn, MRC_NACK_PSN_OOR_WINDOW, trig.entropy, trig.ts, port);
    return;
  }
  // A new PSN inside the window: its plane delivered (PathParams::sack_plane_gap;
  // a replayed or out-of-window packet does not steer the acknowledgements).
  if (port <= kMaxPorts) q.rx_port_seq[port] = ++q.rx_seq;
  if (q.state == QpState::kErr) return;
  const bool imm = codec::opcode_has_imm(p.bth.opcode);
  if (imm) {
    // At most max_wimm_dest WriteIMMs may be outstanding (no RNR in MRC).
    const uint16_t dist = uint16_t(p.meth.rqmsn - q.imm_next);
    if (dist >= std::max<uint16_t>(q.attr.max_wimm_dest, 1) || dist >= q.imm.size()) {
      // Refused, not placed, and resent by the requester (NACK NO_RESOURCE:
      // no path penalty) once earlier WriteIMMs have completed. MRC 1.0
      // fails the QP here, but nothing tells a forged RQMSN from a real one,
      // and a forged packet must not end the QP (security.md).
      q.stats.imm_over_limit++;
      queue_nack(q, psn, MRC_NACK_NO_RESOURCE, trig.entropy, trig.ts, port);
      return;
    }
  }
  if (p.payload_len) {
    // RETH carries the bytes left in the message from this packet on, so every
    // packet checks that the message ends inside the region: a write that runs
    // past the end is refused by all its packets and writes nothing.
    const Mr* m = mr_by_key(p.reth.rkey);
    const uint64_t va = p.reth.va, end = va + p.reth.dma_len;
    const uint64_t base = m ? m->iova : 0;
    const bool ok = m && m->pd == q.pd && (m->access & kAccessRemoteWrite) &&
                    (q.attr.qp_access_flags & kAccessRemoteWrite) && end > va && va >= base &&
                    end <= base + m->len;
    if (!ok) {
      // Nothing is written and the PSN stays missing. The requester sees a
      // remote access error once it resends the PSN and that is refused
      // too; this QP stays up, so a forged request (a guessed QPN and PSN
      // with a wrong key) costs a counter, not the connection.
      q.stats.rem_access_errors++;
      queue_aeth_nak(q, psn, kAethNakRemoteAccess, port);
      return;
    }
    auto* dst = reinterpret_cast<uint8_t*>(uintptr_t(va + m->delta));  // the region's host bytes
    std::memcpy(dst, p.payload, p.payload_head);
    uint32_t left = p.payload_len - p.payload_head;
    dst += p.payload_head;
    for (const codec::FrameSeg& s : p.payload_more) {  // a multi-buffer frame's further buffers
      const uint32_t k = std::min(left, s.len);
      std::memcpy(dst, s.data, k);
      dst += k;
      left -= k;
      if (!left) break;
    }
  }
  q.rwin.mark(psn);
  q.rcvd_bytes += p.payload_len;
  q.unacked_bytes += p.payload_len;
  q.stats.rx_data_bytes += p.payload_len;
  if (port <= kMaxPorts) q.stats.plane_rx_bytes[port] += p.payload_len;
  if (opcode_first(p.bth.opcode)) q.msg_len[p.meth.msn & (q.msg_len.size() - 1)] = p.reth.dma_len;
  if (imm) {
    PendImm& e = q.imm[p.meth.rqmsn & (q.imm.size() - 1)];
    e.known = true;
    e.last_psn = psn;
    e.imm = p.imm;
    e.msn = p.meth.msn;
    q.imm_span++;
  }
  deliver_imm(q);
  if (q.state == QpState::kErr) return;
  // A marked packet is answered within its receive burst: by its own SACK
  // (sack_each_ce), or by the burst's SACK at the end of rx(), which the
  // sender hears just as soon (control packets leave after the burst) and
  // which costs one SACK however many packets of the burst were marked.
  if (ecn && !cfg_.sack_each_ce) {
    q.ce_owed = true;
    q.ce_last = trig;
  }
  const bool now_sack = (ecn && cfg_.sack_each_ce) || p.bth.ack_req || q.first_rx;
  q.first_rx = false;
  q.last = trig;
  if (now_sack) {
    queue_sack(q, trig, ecn ? MRC_MP_SKIP_ONCE : MRC_MP_NONE, false, ecn);
  } else if (q.ce_owed || q.unacked_bytes >= cfg_.sack_bytes) {
    if (!q.sack_due) {
      q.sack_due = true;
      sack_due_.push_back(q.qpn);  // at the end of the burst (rx())
    }
  } else if (q.sack_deadline == kNever) {
    q.sack_deadline = now + cfg_.sack_delay;
  }
}

void Engine::on_trimmed(Qp& q, const codec::Packet& p, uint8_t port, Time rx_ts) {
  const int32_t d = codec::psn_diff(p.bth.psn, q.rwin.next_expected());
  if (d >= 0 && uint32_t(d) >= q.rwin.window()) {
    q.stats.rx_oor_pkts++;  // no request of this QP's peer: no NACK
    return;
  }
  Trigger trig;
  trig.psn = p.bth.psn;
  trig.entropy = codec::ev_from_wire(p.ip, p.udp, q.fmt);
  trig.ts = p.bth.ts ? p.tseth.tx_ts : 0;
  trig.port = port;
  trig.valid = true;
  trig.rx_ts = rx_ts;
  if (q.rwin.received(trig.psn)) {
    queue_sack(q, trig, MRC_MP_NONE, false, false);
    return;
  }
  if ((q.attr.cap_flags & kQpCapTrimNackDestUnsupported) || !(cfg_.device.cap & kDevCapTrimNack))
    return;  // left to SACKs and the requester's timers
  queue_nack(
      q, trig.psn,
      p.trim == codec::TrimKind::kTrimmedLastHop ? MRC_NACK_TRIMMED_LASTHOP : MRC_NACK_TRIMMED,
      trig.entropy, trig.ts, port);
}

void Engine::on_probe(Qp& q, const codec::Packet& p, uint8_t port, Time rx_ts) {
  Trigger trig;
  trig.rx_ts = rx_ts;
  trig.psn = q.rwin.cack();
  trig.entropy = codec::ev_from_wire(p.ip, p.udp, q.fmt);
  trig.ts = p.peth.tx_ts;
  trig.port = port;
  trig.valid = true;
  queue_sack(q, trig, p.ip.ecn == MRC_ECN_CE ? MRC_MP_SKIP_ONCE : MRC_MP_NONE, true,
             p.ip.ecn == MRC_ECN_CE);
}

}  // namespace mrc::core
