// The engine's resilience figures on the simulated fabric (Documentation/design.md):
//   1. one plane blackholed mid-transfer: longest gap between completions and
//      the time until goodput is back at 3/4 of nominal;
//   2. random loss (--loss, 1%) on one plane: goodput as a fraction of lossless;
//   3. 20% loss on one spine path: how soon its EVs leave the active set.
// Deterministic: the same flags give the same numbers.
//
//   sim_figures [--planes 4] [--paths 32] [--gbps 10] [--msg 262144] [--depth 16]
//               [--mtu 4096] [--seed 1] [--json]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "codec/ev.hpp"
#include "sim/cluster.hpp"

using namespace mrc;
using namespace mrc::core;
using sim::kMs;
using sim::kUs;

namespace {

struct Opts {
  uint32_t planes = 4, paths = 32;
  double gbps = 10;
  uint32_t msg = 256 * 1024, depth = 16, mtu = 4096;
  uint64_t seed = 1;
  double loss = 0.01;     // figure 2: end-to-end loss on one plane
  double latency_us = 2;  // per link (three links a way)
  double jitter_us = 0;   // host downlinks: extra delay, uniform (a busy receiver)
  uint32_t cc_base_us = 0, cc_target_us = 0;  // NSCC (0: learned / derived)
  uint32_t queue_kb = 1024;                   // per link queue (a shaper's buffer)
  uint32_t timeout = 10;                      // QP ACK timeout exponent (1.024 us x 2^timeout)
  uint32_t lossy_ms = 60;                     // figure 2: how long the loss lasts
  bool json = false;
};

// One QP pair streaming messages from host 0 to host 1, every message's bytes
// checked at its completion.
class Stream {
 public:
  Stream(const Opts& o) : o_(o) {
    sim::ClusterOptions co;
    co.net.hosts = 2;
    co.net.planes = o.planes;
    co.net.paths_per_plane = o.paths;
    co.net.seed = o.seed;
    co.net.ecmp_seed = o.seed;
    for (sim::LinkParams* lp : {&co.net.uplink, &co.net.spine, &co.net.downlink}) {
      lp->latency = Time(o.latency_us * double(kUs));
      if (lp == &co.net.downlink) lp->jitter = Time(o.jitter_us * double(kUs));
      lp->rate_bps = uint64_t(o.gbps * 1e9);
      lp->queue_bytes = o.queue_kb * 1024;
    }
    co.engine.seed = o.seed;
    co.engine.default_cc.nscc.base_rtt = o.cc_base_us * 1000;
    co.engine.default_cc.nscc.target_delay = o.cc_target_us * 1000;
    c_ = std::make_unique<sim::Cluster>(co);
    for (uint32_t h = 0; h < 2; h++) {
      pd_[h] = *c_->engine(h).create_pd();
      cq_[h] = *c_->engine(h).create_cq(4096);
      QpInitAttr ia;
      ia.pd = pd_[h];
      ia.send_cq = ia.recv_cq = cq_[h];
      ia.cap.max_send_wr = 256;
      qp_[h] = *c_->engine(h).create_qp(ia);
    }
    for (uint32_t h = 0; h < 2; h++) {
      Engine& e = c_->engine(h);
      QpAttr a;
      a.qp_state = QpState::kInit;
      a.qp_access_flags = kAccessLocalWrite | kAccessRemoteWrite;
      ok(e.modify_qp(qp_[h], a, kQpState | kQpPkeyIndex | kQpAccessFlags,
                     kMrcHint | kMrcEvProfileId | kMrcCcProfileId));
      a.qp_state = QpState::kRtr;
      a.path_mtu = o.mtu;
      a.dest_qp_num = qp_[1 - h];
      a.av = c_->av_of(1 - h);
      a.mpr_dest = 16;
      a.max_wimm_dest = 64;
      ok(e.modify_qp(qp_[h], a, kQpState | kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn,
                     kMrcMaxWimmDest | kMrcMprDest));
      a.qp_state = QpState::kRts;
      a.mpr = 16;
      a.max_wimm = 64;
      a.timeout = uint8_t(o.timeout);
      a.retry_linear = 7;
      a.retry_exp = 25;
      ok(e.modify_qp(qp_[h], a, kQpState | kQpSqPsn,
                     kMrcMaxWimm | kMrcMpr | kMrcRetryCnt | kMrcTimeout));
    }
    src_.resize(size_t(o.msg) * o.depth);
    dst_.resize(src_.size());
    smr_ = *c_->engine(0).reg_mr(pd_[0], src_.data(), src_.size(), kAccessLocalWrite);
    dmr_ = *c_->engine(1).reg_mr(pd_[1], dst_.data(), dst_.size(),
                                 kAccessLocalWrite | kAccessRemoteWrite);
    for (uint32_t s = 0; s < o.depth; s++) post(s);
    c_->kick(0);
  }

  sim::Cluster& c() { return *c_; }
  uint32_t qpn() const { return qp_[0]; }
  std::vector<Time> completions;
  uint64_t bytes_done = 0;
  bool corrupt = false;

  // Runs until `t`, sampling goodput in `bin` wide bins into `bins` (Gbit/s).
  void run_to(Time t, Time bin, std::vector<double>* bins) {
    while (c_->now() < t) {
      Time next = std::min(t, c_->now() + bin);
      uint64_t before = bytes_done;
      c_->run_until(
          [&] {
            poll();
            return false;
          },
          next);
      c_->net().run_until(next);
      poll();
      if (bins) bins->push_back(double(bytes_done - before) * 8 / double(next - (next - bin)));
    }
  }

 private:
  static void ok(const Status& s) {
    if (!s.ok()) {
      std::fprintf(stderr, "setup: %s\n", s.error().message().c_str());
      std::exit(1);
    }
  }
  void fill(uint32_t slot, uint64_t k) {
    uint8_t* p = src_.data() + size_t(slot) * o_.msg;
    for (uint32_t i = 0; i < o_.msg; i += 8) {
      uint64_t v = (k << 32) ^ (i * 0x9e3779b97f4a7c15ull);
      std::memcpy(p + i, &v, std::min<uint32_t>(8, o_.msg - i));
    }
  }
  void post(uint32_t slot) {
    uint64_t k = next_++;
    fill(slot, k);
    expect_[slot] = k;
    Sge sg{uint64_t(uintptr_t(src_.data() + size_t(slot) * o_.msg)), o_.msg, smr_.lkey};
    SendWr wr;
    wr.wr_id = slot;
    wr.sg_list = &sg;
    wr.num_sge = 1;
    wr.remote_addr = uint64_t(uintptr_t(dst_.data() + size_t(slot) * o_.msg));
    wr.rkey = dmr_.rkey;
    ok(c_->engine(0).post_send(qp_[0], wr));
  }
  void poll() {
    Wc wc[64];
    auto n = c_->engine(0).poll_cq(cq_[0], wc);
    if (!n.ok()) return;
    for (size_t i = 0; i < *n; i++) {
      uint32_t slot = uint32_t(wc[i].wr_id);
      if (wc[i].status != kWcSuccess || std::memcmp(src_.data() + size_t(slot) * o_.msg,
                                                    dst_.data() + size_t(slot) * o_.msg, o_.msg))
        corrupt = true;
      completions.push_back(c_->now());
      bytes_done += o_.msg;
      post(slot);
    }
    if (*n) c_->kick(0);
  }

  Opts o_;
  std::unique_ptr<sim::Cluster> c_;
  uint32_t pd_[2], cq_[2], qp_[2];
  std::vector<uint8_t> src_, dst_;
  Engine::MrInfo smr_{}, dmr_{};
  uint64_t next_ = 0;
  std::vector<uint64_t> expect_ = std::vector<uint64_t>(1024);
};

double mean(const std::vector<double>& v, size_t from, size_t to) {
  double s = 0;
  for (size_t i = from; i < to && i < v.size(); i++) s += v[i];
  return to > from ? s / double(std::min(to, v.size()) - from) : 0;
}

void plane_fault(sim::Cluster& c, uint32_t plane, const std::function<void(sim::LinkParams&)>& f) {
  c.net().update(sim::LinkSel::plane(int32_t(plane)), [&](sim::LinkParams& p, sim::Tier) { f(p); });
}

}  // namespace

int main(int argc, char** argv) {
  Opts o;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    auto val = [&] { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
    if (a == "--planes")
      o.planes = uint32_t(std::stoul(val()));
    else if (a == "--paths")
      o.paths = uint32_t(std::stoul(val()));
    else if (a == "--gbps")
      o.gbps = std::stod(val());
    else if (a == "--msg")
      o.msg = uint32_t(std::stoul(val()));
    else if (a == "--depth")
      o.depth = uint32_t(std::stoul(val()));
    else if (a == "--mtu")
      o.mtu = uint32_t(std::stoul(val()));
    else if (a == "--seed")
      o.seed = std::stoull(val());
    else if (a == "--loss")
      o.loss = std::stod(val()) / 100;
    else if (a == "--latency-us")
      o.latency_us = std::stod(val());
    else if (a == "--jitter-us")
      o.jitter_us = std::stod(val());
    else if (a == "--cc-base-us")
      o.cc_base_us = uint32_t(std::stoul(val()));
    else if (a == "--cc-target-us")
      o.cc_target_us = uint32_t(std::stoul(val()));
    else if (a == "--queue-kb")
      o.queue_kb = uint32_t(std::stoul(val()));
    else if (a == "--timeout")
      o.timeout = uint32_t(std::stoul(val()));
    else if (a == "--lossy-ms")
      o.lossy_ms = uint32_t(std::stoul(val()));
    else if (a == "--json")
      o.json = true;
    else {
      std::fprintf(stderr,
                   "usage: %s [--planes N] [--paths M] [--gbps G] [--msg B] [--depth D] [--mtu B] "
                   "[--seed S] [--loss PCT] [--latency-us US] [--jitter-us US] [--cc-base-us US] "
                   "[--cc-target-us US] [--queue-kb KB] [--timeout EXP] [--lossy-ms MS] [--json]\n",
                   argv[0]);
      return 2;
    }
  }
  const Time bin = 100 * kUs;
  const double nominal = o.gbps * o.planes;

  // 1. Blackhole a plane mid-transfer.
  double f1_before, f1_after, f1_gap_us, f1_recover_us = -1, f1_min_bin;
  {
    Stream s(o);
    std::vector<double> bins;
    const Time fault = 20 * kMs;
    s.run_to(fault, bin, &bins);
    size_t pre = bins.size();
    plane_fault(s.c(), 1, [](sim::LinkParams& p) { p.blackhole = true; });
    if (getenv("SIMDBG")) {
      // What the sender does in the first 12 ms: every 250 us its counters,
      // and every EV state change.
      EvEvent drain[1024];
      while (s.c().engine(0).poll_ev_events(drain)) {
      }
      for (Time t = fault + 250 * kUs; t <= fault + 12 * kMs; t += 250 * kUs) {
        s.run_to(t, 250 * kUs, &bins);
        auto st = *s.c().engine(0).qp_stats(s.qpn());
        std::fprintf(stderr,
                     "t+%5.2f ms: done %llu KB cwnd %llu inflight %llu srtt %llu us rtx %llu (sack "
                     "%llu) tlp %llu to %llu bad %llu\n",
                     double(t - fault) / 1e6, (unsigned long long)(s.bytes_done >> 10),
                     (unsigned long long)st.cwnd_bytes, (unsigned long long)st.inflight_bytes,
                     (unsigned long long)(st.srtt_ns / 1000), (unsigned long long)st.tx_rtx_pkts,
                     (unsigned long long)st.rtx_sack, (unsigned long long)st.tlp_probes,
                     (unsigned long long)st.timeouts, (unsigned long long)st.ev_assumed_bad);
        size_t n = s.c().engine(0).poll_ev_events(drain);
        for (size_t i = 0; i < n; i++)
          std::fprintf(stderr, "    ev %05x port %u %u->%u reason %u at +%.3f ms\n", drain[i].ev,
                       drain[i].port, unsigned(drain[i].from), unsigned(drain[i].to),
                       unsigned(drain[i].reason), double(drain[i].time - fault) / 1e6);
      }
    }
    s.run_to(fault + 40 * kMs, bin, &bins);
    f1_before = mean(bins, pre - 50, pre);
    f1_after = mean(bins, bins.size() - 100, bins.size());
    Time gap = 0, prev = 0;
    for (Time t : s.completions) {
      if (t >= fault && prev) gap = std::max(gap, t - std::max(prev, fault));
      prev = t;
    }
    f1_gap_us = double(gap) / 1e3;
    f1_min_bin = *std::min_element(bins.begin() + long(pre), bins.end());
    for (size_t i = pre; i < bins.size(); i++)
      if (bins[i] >= 0.75 * f1_before) {
        f1_recover_us = double(i - pre + 1) * double(bin) / 1e3;
        break;
      }
    if (s.corrupt) std::fprintf(stderr, "figure 1: data verification FAILED\n");
    if (getenv("SIMDBG")) {
      auto st = *s.c().engine(0).qp_stats(s.qpn());
      std::fprintf(stderr,
                   "fig1: timeouts %llu tlp %llu rtx %llu sack %llu nack %llu to %llu suspects "
                   "%llu bad %llu spurious %llu\n",
                   (unsigned long long)st.timeouts, (unsigned long long)st.tlp_probes,
                   (unsigned long long)st.tx_rtx_pkts, (unsigned long long)st.rtx_sack,
                   (unsigned long long)st.rtx_nack, (unsigned long long)st.rtx_timeout,
                   (unsigned long long)st.plane_suspects, (unsigned long long)st.ev_assumed_bad,
                   (unsigned long long)st.spurious_rtx);
      Time prev = 0;
      for (Time t : s.completions) {
        if (t >= fault && prev && t - std::max(prev, fault) > 200 * kUs)
          std::fprintf(stderr, "  gap %.1f us at %.3f ms\n",
                       double(t - std::max(prev, fault)) / 1e3,
                       double(std::max(prev, fault) - fault) / 1e6);
        prev = t;
      }
    }
  }
  // 2. Random loss on one plane.
  double f2_clean, f2_lossy;
  uint64_t f2_bad = 0, f2_readmit = 0;
  {
    Stream s(o);
    std::vector<double> bins;
    s.run_to(20 * kMs, bin, &bins);
    f2_clean = mean(bins, 50, bins.size());
    const double l = 1 - std::cbrt(1 - o.loss);  // three links: o.loss end to end
    plane_fault(s.c(), 1, [l](sim::LinkParams& p) { p.loss = l; });
    size_t pre = bins.size();
    s.run_to((20 + o.lossy_ms) * kMs, bin, &bins);
    f2_lossy = mean(bins, pre + 50, bins.size());
    auto st = *s.c().engine(0).qp_stats(s.qpn());
    if (getenv("SIMDBG")) {
      size_t empty = 0;
      for (size_t i = pre; i < bins.size(); i++) empty += bins[i] == 0;
      std::fprintf(stderr,
                   "fig2: timeouts %llu tlp %llu rtx %llu sack %llu nack %llu to %llu suspects "
                   "%llu bad %llu spurious %llu srtt %llu us; empty 100us bins %zu of %zu\n",
                   (unsigned long long)st.timeouts, (unsigned long long)st.tlp_probes,
                   (unsigned long long)st.tx_rtx_pkts, (unsigned long long)st.rtx_sack,
                   (unsigned long long)st.rtx_nack, (unsigned long long)st.rtx_timeout,
                   (unsigned long long)st.plane_suspects, (unsigned long long)st.ev_assumed_bad,
                   (unsigned long long)st.spurious_rtx, (unsigned long long)(st.srtt_ns / 1000),
                   empty, bins.size() - pre);
    }
    f2_bad = st.ev_assumed_bad;
    f2_readmit = st.ev_readmitted;
    if (s.corrupt) std::fprintf(stderr, "figure 2: data verification FAILED\n");
  }
  // 3. 20% loss on one spine path: when do its EVs leave the active set?
  std::vector<double> f3_us;
  uint32_t f3_evs = 0;
  {
    Stream s(o);
    s.run_to(10 * kMs, bin, nullptr);
    const uint32_t plane = 0, path = 5;
    // Which active EVs of plane 0 hash onto that path?
    auto evs = *s.c().engine(0).qp_evs(s.qpn());
    std::vector<uint32_t> on_path;
    for (const auto& e : evs) {
      if (e.port != sim::Cluster::port_of(plane)) continue;
      codec::Packet p;
      p.eth.src = s.c().net().mac_of(0, plane);
      p.eth.dst = s.c().net().mac_of(1, plane);
      p.ip.src = s.c().net().ip_of(0, plane);
      p.ip.dst = s.c().net().ip_of(1, plane);
      p.bth.opcode = MRC_OP_PROBE;
      codec::ev_apply(e.ev, codec::EvFmtMode::kStev, p.ip, p.udp);
      std::vector<uint8_t> f(codec::frame_size(p));
      codec::build(p, f);
      if (s.c().net().ecmp_path(f) == int(path) && e.active) on_path.push_back(e.ev);
    }
    f3_evs = uint32_t(on_path.size());
    EvEvent drain[256];
    while (s.c().engine(0).poll_ev_events(drain)) {
    }
    const Time fault = s.c().now();
    s.c().net().update(sim::LinkSel::path(int32_t(plane), int32_t(path)),
                       [](sim::LinkParams& p, sim::Tier) { p.loss = 0.2; });
    s.run_to(fault + 20 * kMs, bin, nullptr);
    EvEvent ev[1024];
    size_t n = s.c().engine(0).poll_ev_events(ev);
    for (uint32_t v : on_path)
      for (size_t i = 0; i < n; i++)
        if (ev[i].ev == v && ev[i].to == EvState::kAssumedBad) {
          f3_us.push_back(double(ev[i].time - fault) / 1e3);
          break;
        }
    std::sort(f3_us.begin(), f3_us.end());
    if (s.corrupt) std::fprintf(stderr, "figure 3: data verification FAILED\n");
  }

  const double f3_med = f3_us.empty() ? -1 : f3_us[f3_us.size() / 2];
  const double f3_max = f3_us.empty() ? -1 : f3_us.back();
  if (o.json) {
    std::printf(
        "{\"planes\":%u,\"paths\":%u,\"gbps\":%.1f,\"nominal_gbps\":%.1f,"
        "\"blackhole\":{\"before_gbps\":%.2f,\"after_gbps\":%.2f,\"min_bin_gbps\":%.2f,\"longest_"
        "gap_us\":%.1f,\"recover_us\":%.0f},"
        "\"loss1pct\":{\"clean_gbps\":%.2f,\"lossy_gbps\":%.2f,\"fraction\":%.3f,\"evs_assumed_"
        "bad\":%llu,\"readmitted\":%llu},"
        "\"path20pct\":{\"evs_on_path\":%u,\"demoted\":%zu,\"median_us\":%.1f,\"max_us\":%.1f}}\n",
        o.planes, o.paths, o.gbps, nominal, f1_before, f1_after, f1_min_bin, f1_gap_us,
        f1_recover_us, f2_clean, f2_lossy, f2_lossy / f2_clean, (unsigned long long)f2_bad,
        (unsigned long long)f2_readmit, f3_evs, f3_us.size(), f3_med, f3_max);
  } else {
    std::printf(
        "fabric: %u planes x %u paths, %.1f Gbit/s links (nominal %.0f Gbit/s), %u KiB messages, "
        "MTU %u\n",
        o.planes, o.paths, o.gbps, nominal, o.msg / 1024, o.mtu);
    std::printf(
        "1. plane blackholed mid-transfer: goodput %.2f -> %.2f Gbit/s; lowest 100us bin %.2f "
        "Gbit/s;\n"
        "   longest gap between completions %.1f us; back at 3/4 of pre-fault goodput after %.0f "
        "us\n",
        f1_before, f1_after, f1_min_bin, f1_gap_us, f1_recover_us);
    std::printf(
        "2. %.1f%% random loss on one plane: goodput %.2f of lossless (%.2f vs %.2f Gbit/s); "
        "%llu EVs assumed bad, %llu readmitted\n",
        o.loss * 100, f2_lossy / f2_clean, f2_lossy, f2_clean, (unsigned long long)f2_bad,
        (unsigned long long)f2_readmit);
    std::printf(
        "3. 20%% loss on one path: %u active EVs hash onto it, %zu left the active set; after %.1f "
        "us (median), %.1f us (max)\n",
        f3_evs, f3_us.size(), f3_med, f3_max);
  }
  return 0;
}
