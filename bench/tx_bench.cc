// tx_bench: the two TX backends of user/xdp over one veth pair, measured in
// the same run, interleaved (Documentation/xdp-tx.md, "Performance"). Not a
// test: it prints figures.
//
//   xsk    AF_XDP copy-mode TX (XskSocket: UMEM, TX ring, sendto kick)
//   live   LiveTx: slots + BPF_PROG_TEST_RUN with BPF_F_TEST_XDP_LIVE_FRAMES
//          (one syscall per submit of N frames)
//
// Namespace A sends, namespace B receives into AF_XDP (user/xdp Device +
// xsk_test.bpf.c); "-drop" variants drop in B's XDP instead (the TX side
// alone). The sender is pinned to one CPU, the receiver to the other. Both
// senders write every frame with memcpy (the engine's one copy). Every
// repetition runs every (size, mode) once, in order; the table shows medians.
// TX CPU is the sending thread's CPU time (CLOCK_THREAD_CPUTIME_ID): on veth
// it includes the receiving veth's NAPI (B's XDP and the AF_XDP copy), which
// runs in the sender's context in both modes.
#include <pthread.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.hpp"
#include "support/netns_fixture.hpp"
#include "support/test_frames.hpp"
#include "support/test_prog.hpp"
#include "xdp/device.hpp"
#include "xdp/live_tx.hpp"
#include "xdp/netns.hpp"

using namespace mrc;
using namespace mrc::xdp;
using mrc::bench::die;
using mrc::bench::must;
using mrc::bench::now_ns;
using mrc::bench::pin;
using mrc::xsktest::TestProg;
using mrc::xsktest::Topology;

namespace {

struct Options {
  double seconds = 1.0;
  double warmup = 0.3;
  int reps = 5;
  std::vector<uint32_t> sizes = {64, 1024, 3400};
  std::vector<std::string> modes = {"xsk",         "live/64",  "live/256",     "xsk-win",
                                    "live/64-win", "xsk-drop", "live/64-drop", "live/256-drop"};
  uint32_t burst = 64;       // frames reserved and written per round
  uint32_t window = 4096;    // -win modes: frames sent and not yet received
  uint32_t live_batch = 64;  // LiveTxConfig::batch (BPF_PROG_TEST_RUN batch_size)
  int tx_cpu = 0;
  int rx_cpu = 1;
};

uint64_t thread_cpu_ns() { return bench::clock_ns(CLOCK_THREAD_CPUTIME_ID); }

struct Mode {
  std::string name;
  bool live = false;
  uint32_t submit_every = 64;  // live: frames per BPF_PROG_TEST_RUN
  bool drop = false;           // B drops in XDP (no AF_XDP receiver)
  bool keepalive = true;       // live: dispatcher keepalive
  bool window = false;         // closed loop: at most Options::window frames in flight
};

Mode parse_mode(const std::string& s) {
  Mode m;
  m.name = s;
  std::string base = s;
  if (auto p = base.find("-nokeep"); p != std::string::npos) {
    m.keepalive = false;
    base.erase(p, 7);
  }
  if (auto p = base.find("-win"); p != std::string::npos) {
    m.window = true;
    base.erase(p, 4);
  }
  if (auto p = base.find("-drop"); p != std::string::npos) {
    m.drop = true;
    base.erase(p, 5);
  }
  if (base == "xsk") return m;
  if (base.rfind("live/", 0) == 0) {
    m.live = true;
    m.submit_every = static_cast<uint32_t>(std::strtoul(base.c_str() + 5, nullptr, 10));
    if (m.submit_every == 0) die("bad mode " + s);
    return m;
  }
  die("unknown mode " + s + " (xsk, live/<N>, with -drop and, for live, -nokeep)");
}

// Counters the threads publish (window values).
struct Shared {
  std::atomic<bool> stop{false};
  std::atomic<bool> measuring{false};
  std::atomic<uint64_t> tx{0}, tx_cpu{0}, syscalls{0}, rx{0}, rx_bytes{0}, rx_cpu{0};
  std::atomic<uint64_t> rx_total{0};  // every frame received, never reset
  std::atomic<uint64_t> stalls{0};    // window waits that timed out (frames lost)
  uint32_t window = 0;                // 0 = open loop
  uint64_t sent_total = 0;            // sender thread only

  // Closed loop: waits (bounded) until fewer than `window` frames are in
  // flight. A frame lost on the way would block the window: after 50 ms the
  // sender gives up waiting and counts a stall.
  uint64_t wait_cpu = 0;  // sender CPU spent waiting for the window (not sending)
  void wait_window() {
    if (!window) return;
    const uint64_t c0 = thread_cpu_ns();
    wait_window_();
    wait_cpu += thread_cpu_ns() - c0;
  }
  void wait_window_() {
    const uint64_t end = now_ns() + 50000000;
    while (sent_total - rx_total.load(std::memory_order_acquire) >= window) {
      if (now_ns() > end) {
        stalls.fetch_add(1, std::memory_order_relaxed);
        rx_total.store(sent_total, std::memory_order_release);
        return;
      }
    }
  }
};

struct Sample {
  double secs = 0;
  uint64_t tx = 0, rx = 0, rx_bytes = 0, tx_cpu = 0, rx_cpu = 0, syscalls = 0;
  uint64_t rx_drops = 0;   // B's AF_XDP socket: rx_dropped + rx_ring_full
  uint64_t drv_drops = 0;  // live: frames the driver refused or the redirect failed
  uint64_t stalls = 0;
};

void rx_loop(Device* dev, Shared* sh, int cpu) {
  pin(cpu);
  RxFrame buf[64];
  uint64_t rx = 0, bytes = 0, sink = 0, c0 = 0;
  bool was = false;
  while (!sh->stop.load(std::memory_order_relaxed)) {
    const uint32_t n = dev->rx(buf);
    for (uint32_t i = 0; i < n; ++i) {
      sink += buf[i].data[0];
      bytes += buf[i].len;
    }
    if (n) {
      dev->release({buf, n});
      sh->rx_total.fetch_add(n, std::memory_order_release);
    }
    const bool m = sh->measuring.load(std::memory_order_relaxed);
    if (m != was) {
      rx = bytes = 0;
      c0 = thread_cpu_ns();
      was = m;
    }
    rx += n;
    if (m) {
      sh->rx.store(rx, std::memory_order_relaxed);
      sh->rx_bytes.store(bytes, std::memory_order_relaxed);
      sh->rx_cpu.store(thread_cpu_ns() - c0, std::memory_order_relaxed);
    }
  }
  if (sink == 1) std::fprintf(stderr, " ");
}

// AF_XDP copy-mode sender (as bench/xsk_bench.cc).
void xsk_loop(Device* dev, Shared* sh, int cpu, uint32_t burst, const std::vector<uint8_t>* frame) {
  pin(cpu);
  XskSocket& s = dev->sockets()[0];
  std::vector<TxFrame> f(burst);
  const uint32_t len = static_cast<uint32_t>(frame->size());
  uint64_t tx = 0, c0 = 0, k0 = 0, polls = 0;
  bool was = false;
  while (!sh->stop.load(std::memory_order_relaxed)) {
    sh->wait_window();
    s.reap();
    const uint32_t k = s.tx_reserve(f);
    if (k == 0) {
      if (!s.flush_tx()) {
        (void)dev->wait(1);
        ++polls;
      }
      continue;
    }
    for (uint32_t i = 0; i < k; ++i) {
      std::memcpy(f[i].data, frame->data(), len);
      f[i].len = len;
    }
    s.tx_submit({f.data(), k}, false);
    s.flush_tx();
    sh->sent_total += k;
    const bool m = sh->measuring.load(std::memory_order_relaxed);
    if (m != was) {
      tx = polls = 0;
      c0 = thread_cpu_ns() - sh->wait_cpu;
      k0 = s.counters().tx_kicks;
      was = m;
    }
    tx += k;
    if (m) {
      sh->tx.store(tx, std::memory_order_relaxed);
      sh->tx_cpu.store(thread_cpu_ns() - sh->wait_cpu - c0, std::memory_order_relaxed);
      sh->syscalls.store(s.counters().tx_kicks - k0 + polls, std::memory_order_relaxed);
    }
  }
}

// LiveTx sender: reserve a burst, write, commit; submit every submit_every.
void live_loop(LiveTx* tx, Shared* sh, int cpu, uint32_t burst, uint32_t submit_every,
               const std::vector<uint8_t>* frame) {
  pin(cpu);
  std::vector<LiveTxFrame> f(burst);
  const uint32_t len = static_cast<uint32_t>(frame->size());
  uint64_t sent = 0, c0 = 0, s0 = 0;
  bool was = false;
  while (!sh->stop.load(std::memory_order_relaxed)) {
    if (tx->pending() == 0) sh->wait_window();
    const uint32_t want = std::min(burst, submit_every - tx->pending());
    const uint32_t k = tx->reserve(0, {f.data(), want});
    for (uint32_t i = 0; i < k; ++i) {
      std::memcpy(f[i].data, frame->data(), len);
      f[i].len = len;
    }
    tx->commit({f.data(), k});
    if (tx->pending() < submit_every && k == want) continue;
    auto r = tx->submit();
    if (!r) die("submit: " + r.error().message());
    sh->sent_total += *r;
    const bool m = sh->measuring.load(std::memory_order_relaxed);
    if (m != was) {
      sent = 0;
      c0 = thread_cpu_ns() - sh->wait_cpu;
      s0 = tx->counters().submits;
      was = m;
    }
    sent += *r;
    if (m) {
      sh->tx.store(sent, std::memory_order_relaxed);
      sh->tx_cpu.store(thread_cpu_ns() - sh->wait_cpu - c0, std::memory_order_relaxed);
      sh->syscalls.store(tx->counters().submits - s0, std::memory_order_relaxed);
    }
  }
}

std::vector<uint8_t> make_frame(const Topology& t, uint32_t size) {
  std::vector<uint8_t> f(std::max<uint32_t>(size, xsktest::kMinFrame));
  const auto& v = t.pairs()[0];
  xsktest::write_frame(f.data(), static_cast<uint32_t>(f.size()), v.b_mac, v.a_mac, 1, 0, 0, 7);
  return f;
}

// Sender (xsk) and receiver: 8192-entry rings, so a receiver that loses its
// core for a few ms (shared machine) does not drop at once.
DeviceConfig dev_cfg(const std::string& ifname) {
  DeviceConfig c;
  c.ports.push_back({ifname});
  c.umem.frame_count = 32768;
  c.umem.frame_size = 4096;
  c.umem.fill_size = 8192;
  c.umem.comp_size = 8192;
  c.socket.rx_size = 8192;
  c.socket.tx_size = 8192;
  c.watch_links = false;
  return c;
}

struct Receiver {
  Device dev;
  std::unique_ptr<TestProg> prog;
};

Receiver open_receiver(const Topology& t, bool drop) {
  auto ns = must(t.enter_b(), "entering namespace B");
  Receiver r;
  r.dev = must(Device::open(dev_cfg(t.pairs()[0].b_if)), "opening device B");
  r.prog = must(TestProg::load(), "loading xsk_test");
  must(r.prog->attach(t.pairs()[0].b_if, 0, drop ? r.prog->drop_fd() : -1), "attaching on B");
  must(r.prog->set_cfg({}), "cfg");
  must(r.dev.insert_into_xskmap(r.prog->xsks_fd(), [](uint16_t, uint32_t q) { return q; }),
       "XSKMAP");
  return r;
}

Sample run(const Topology& t, const Options& o, uint32_t size, const Mode& m) {
  Receiver r = open_receiver(t, m.drop);
  const std::vector<uint8_t> frame = make_frame(t, size);
  Shared sh;
  sh.window = m.window ? o.window : 0;
  Device a;
  LiveTx live;
  if (m.live) {
    LiveTxConfig c;
    c.ports.push_back({t.pairs()[0].a_if, t.ns_a()});
    c.slots = 1024;
    c.batch = o.live_batch;
    c.dispatcher_keepalive = m.keepalive;
    live = must(LiveTx::create(c), "LiveTx");
    if (live.max_frame(0) < frame.size())
      die("frame of " + std::to_string(frame.size()) + " bytes over the live limit " +
          std::to_string(live.max_frame(0)));
  } else {
    auto ns = must(t.enter_a(), "entering namespace A");
    a = must(Device::open(dev_cfg(t.pairs()[0].a_if)), "opening device A");
  }
  std::thread rx;
  if (!m.drop) rx = std::thread(rx_loop, &r.dev, &sh, o.rx_cpu);
  std::thread tx =
      m.live ? std::thread(live_loop, &live, &sh, o.tx_cpu, o.burst, m.submit_every, &frame)
             : std::thread(xsk_loop, &a, &sh, o.tx_cpu, o.burst, &frame);
  std::this_thread::sleep_for(std::chrono::duration<double>(o.warmup));
  sh.measuring.store(true);
  const uint64_t t0 = now_ns();
  std::this_thread::sleep_for(std::chrono::duration<double>(o.seconds));
  const uint64_t t1 = now_ns();
  sh.measuring.store(false);
  sh.stop.store(true);
  tx.join();
  if (rx.joinable()) rx.join();
  Sample s;
  s.secs = static_cast<double>(t1 - t0) / 1e9;
  s.tx = sh.tx;
  s.tx_cpu = sh.tx_cpu;
  s.syscalls = sh.syscalls;
  if (m.drop) {  // what B's XDP dropped stands for "received"
    s.rx = s.tx;
    s.rx_bytes = s.tx * frame.size();
  } else {
    s.rx = sh.rx;
    s.rx_bytes = sh.rx_bytes;
    s.rx_cpu = sh.rx_cpu;
  }
  if (auto k = r.dev.kernel_stats()) s.rx_drops = k->rx_dropped + k->rx_ring_full;
  if (m.live) {
    const LiveTxCounters& c = live.counters();
    s.drv_drops = c.xmit_drops + c.redirect_err + c.prog_errors + c.lost;
  }
  s.stalls = sh.stalls;
  return s;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

template <class T, class F>
std::vector<T> split(const char* s, F conv) {
  std::vector<T> out;
  std::string cur;
  for (const char* p = s;; ++p) {
    if (*p == ',' || *p == 0) {
      if (!cur.empty()) out.push_back(conv(cur));
      cur.clear();
      if (*p == 0) break;
    } else {
      cur += *p;
    }
  }
  return out;
}

std::string loadavg() {
  FILE* f = std::fopen("/proc/loadavg", "r");
  if (!f) return "?";
  char buf[64] = {};
  if (!std::fgets(buf, sizeof(buf), f)) buf[0] = 0;
  std::fclose(f);
  std::string s(buf);
  size_t cut = 0;
  for (int sp = 0; cut < s.size(); ++cut)
    if (s[cut] == ' ' && ++sp == 3) break;
  return s.substr(0, cut);
}

void usage() {
  std::puts(
      "usage: tx_bench [--seconds S] [--reps N] [--sizes 64,1024,3400] [--burst N]\n"
      "                [--modes xsk,live/64,...] [--window N] [--live-batch N]\n"
      "                [--tx-cpu C] [--rx-cpu C]\n"
      "modes: xsk (AF_XDP copy-mode TX), live/<N> (LiveTx, one BPF_PROG_TEST_RUN per N\n"
      "frames); suffixes: -win (closed loop, --window frames in flight), -drop (B drops in\n"
      "XDP: the TX side alone), -nokeep (live: no dispatcher keepalive). Needs root; makes\n"
      "its own namespaces and veth pair; prints medians over N interleaved repetitions.");
}

}  // namespace

int main(int argc, char** argv) {
  mrc::bench::g_prog = "tx_bench";
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) die("missing value for " + a);
      return argv[++i];
    };
    if (a == "--seconds")
      o.seconds = std::atof(next());
    else if (a == "--reps")
      o.reps = std::atoi(next());
    else if (a == "--sizes")
      o.sizes = split<uint32_t>(next(), [](const std::string& x) {
        return static_cast<uint32_t>(std::strtoul(x.c_str(), nullptr, 10));
      });
    else if (a == "--modes")
      o.modes = split<std::string>(next(), [](const std::string& x) { return x; });
    else if (a == "--live-batch")
      o.live_batch = static_cast<uint32_t>(std::atoi(next()));
    else if (a == "--window")
      o.window = static_cast<uint32_t>(std::atoi(next()));
    else if (a == "--burst")
      o.burst = static_cast<uint32_t>(std::atoi(next()));
    else if (a == "--tx-cpu")
      o.tx_cpu = std::atoi(next());
    else if (a == "--rx-cpu")
      o.rx_cpu = std::atoi(next());
    else if (a == "-h" || a == "--help") {
      usage();
      return 0;
    } else {
      usage();
      return 2;
    }
  }
  std::vector<Mode> modes;
  for (const std::string& s : o.modes) modes.push_back(parse_mode(s));
  const std::string why = xsktest::skip_reason();
  if (!why.empty()) die(why);
  const std::string load_start = loadavg();
  const uint32_t max_size = *std::max_element(o.sizes.begin(), o.sizes.end());
  const uint32_t mtu = std::max<uint32_t>(1500, max_size - 14);
  Topology t = must(Topology::create(1, 1, mtu), "making namespaces and veth");
  std::printf(
      "tx_bench: veth pair in %s/%s, MTU %u, burst %u, live batch %u, window %u, TX cpu %d, RX "
      "cpu %d, %.1f s x %d reps (medians), load %s\n",
      t.ns_a().c_str(), t.ns_b().c_str(), mtu, o.burst, o.live_batch, o.window, o.tx_cpu, o.rx_cpu,
      o.seconds, o.reps, load_start.c_str());

  std::map<std::string, std::vector<Sample>> res;
  for (int rep = 0; rep < o.reps; ++rep) {
    for (uint32_t size : o.sizes)
      for (const Mode& m : modes)
        res[std::to_string(size) + "|" + m.name].push_back(run(t, o, size, m));
    std::fprintf(stderr, "repetition %d/%d done (load %s)\n", rep + 1, o.reps, loadavg().c_str());
  }

  std::printf("\n%-5s %-16s %8s %8s %8s %9s %9s %9s %8s %6s %6s %11s\n", "size", "mode", "rx Mpps",
              "Gbit/s", "tx Mpps", "txCPU ns", "B drop/s", "drv drop", "sys/fr", "rx%", "stalls",
              "rx min-max");
  for (uint32_t size : o.sizes)
    for (const Mode& m : modes) {
      const auto& v = res[std::to_string(size) + "|" + m.name];
      auto med = [&](auto f) {
        std::vector<double> x;
        for (const Sample& s : v) x.push_back(f(s));
        return median(x);
      };
      std::vector<double> mpps;
      for (const Sample& s : v) mpps.push_back(s.rx / s.secs / 1e6);
      std::sort(mpps.begin(), mpps.end());
      char range[32];
      std::snprintf(range, sizeof(range), "%.2f-%.2f", mpps.front(), mpps.back());
      std::printf("%-5u %-16s %8.3f %8.2f %8.3f %9.0f %9.0f %9.0f %8.4f %6.0f %6.0f %11s\n", size,
                  m.name.c_str(), med([](const Sample& s) { return s.rx / s.secs / 1e6; }),
                  med([](const Sample& s) { return s.rx_bytes * 8.0 / s.secs / 1e9; }),
                  med([](const Sample& s) { return s.tx / s.secs / 1e6; }),
                  med([](const Sample& s) { return s.tx ? double(s.tx_cpu) / s.tx : 0; }),
                  med([](const Sample& s) { return s.rx_drops / s.secs; }),
                  med([](const Sample& s) { return double(s.drv_drops); }),
                  med([](const Sample& s) { return s.tx ? double(s.syscalls) / s.tx : 0; }),
                  med([](const Sample& s) { return 100.0 * s.rx_cpu / (s.secs * 1e9); }),
                  med([](const Sample& s) { return double(s.stalls); }), range);
    }
  std::printf(
      "rx Mpps/Gbit/s: frames (Ethernet bytes) B's AF_XDP socket received (-drop: frames the\n"
      "sender handed over). txCPU ns: sending thread's CPU time per frame sent, including the\n"
      "receiving veth's NAPI that runs in its context (window waits excluded). B drop/s: B's "
      "AF_XDP socket dropped\n"
      "(RX ring full, no fill entry). drv drop: live frames the driver refused or whose\n"
      "redirect failed (whole run, warm-up included). sys/fr: sendto (xsk) or\n"
      "BPF_PROG_TEST_RUN (live) per frame. -win: closed loop, at most --window frames in\n"
      "flight (stalls: waits that timed out). rx min-max: range of rx Mpps over the reps.\n");
  std::printf("load average at start: %s, at end: %s\n", load_start.c_str(), loadavg().c_str());
  return 0;
}
