// xsk_bench: raw AF_XDP throughput of the user/xdp layer over one veth pair
// (Documentation/afxdp.md, "Performance"). Not a test: it prints figures.
//
// Namespace A holds the sender, namespace B the receiver; one thread per
// side, each pinned to its own core. Measured, interleaved per repetition:
//   txrx     AF_XDP TX (A) -> veth -> XDP redirect -> AF_XDP RX (B)
//   rx       AF_XDP RX alone; frames made by BPF_PROG_TEST_RUN with
//            BPF_F_TEST_XDP_LIVE_FRAMES (XDP_TX out of A's veth)
//   gen      the live-frames generator alone (B's XDP drops everything)
//   memcpy   GB/s of one core copying frame-sized blocks
// Variants of txrx show what helps the TX side: the copy-mode TX budget
// (frames per sendto), busy polling on the receiver, threaded NAPI.
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <dirent.h>
#include <linux/if_link.h>
#include <net/if.h>
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
  double seconds = 2.0;
  double warmup = 0.3;
  int reps = 3;
  std::vector<uint32_t> sizes = {64, 1500, 3072};
  uint32_t batch = 64;
  int tx_cpu = 0;
  int rx_cpu = 1;
  bool variants = true;
  bool txrx = true, rx = true, gen = true, memcpy_ = true;
};

// CPU time a thread of this process has run (schedstat), 0 if unknown.
uint64_t thread_cpu_ns(pid_t tid) {
  if (tid == 0) return 0;
  const std::string path = "/proc/self/task/" + std::to_string(tid) + "/schedstat";
  FILE* f = std::fopen(path.c_str(), "r");
  if (!f) return 0;
  unsigned long long ns = 0;
  if (std::fscanf(f, "%llu", &ns) != 1) ns = 0;
  std::fclose(f);
  return ns;
}

// The variants of a TX->RX run.
struct Variant {
  std::string name;
  uint32_t tx_budget = 0;      // 0 = TX ring size (XDP_MAX_TX_SKB_BUDGET)
  bool busy_poll = false;      // receiver: SO_PREFER_BUSY_POLL + napi_defer_hard_irqs
  bool threaded_napi = false;  // receiver veth: NAPI in a kthread
  bool rx_drop = false;        // receiver's XDP drops: the TX side alone
  bool rx_wait = false;        // receiver sleeps in poll() when idle (else it spins)
};

struct Sample {
  double secs = 0;
  uint64_t tx = 0, rx = 0, rx_bytes = 0, gen = 0;
  uint64_t kicks = 0, rx_wakeups = 0;
  // TX stage nanoseconds (summed over the window) and frames they covered.
  uint64_t ns_reap = 0, ns_reserve = 0, ns_write = 0, ns_submit = 0, ns_kick = 0, tx_batches = 0;
  uint64_t ns_rx = 0, ns_release = 0, rx_batches = 0;
  uint64_t rx_dropped = 0;
  uint64_t cpu_tx = 0, cpu_rx = 0;  // thread CPU ns in the window (sender/generator, receiver)
  double mpps() const { return rx / secs / 1e6; }
  double gbps() const { return rx_bytes * 8.0 / secs / 1e9; }
};

// Counters the data-path threads publish for the main thread.
struct Shared {
  std::atomic<bool> stop{false};
  std::atomic<bool> measuring{false};
  std::atomic<uint64_t> tx{0}, rx{0}, rx_bytes{0}, gen{0}, kicks{0}, rx_wakeups{0};
  std::atomic<uint64_t> ns_reap{0}, ns_reserve{0}, ns_write{0}, ns_submit{0}, ns_kick{0},
      tx_batches{0};
  std::atomic<uint64_t> ns_rx{0}, ns_release{0}, rx_batches{0};
  std::atomic<pid_t> tid_tx{0}, tid_rx{0};
};

// Sets a sysfs knob of B's veth (ip netns exec remounts /sys for B).
void sysfs_b(const Topology& t, const std::string& knob, const std::string& value) {
  const std::string path = "/sys/class/net/" + t.pairs()[0].b_if + "/" + knob;
  auto r = t.exec(1, {"sh", "-c", "echo " + value + " > " + path});
  if (!r)
    std::fprintf(stderr, "note: %s=%s: %s\n", knob.c_str(), value.c_str(),
                 r.error().message().c_str());
}

void rx_loop(Device* dev, Shared* sh, int cpu, uint32_t batch, bool wait) {
  pin(cpu);
  sh->tid_rx = gettid();
  std::vector<RxFrame> buf(batch);
  uint64_t rx = 0, bytes = 0, t_rx = 0, t_rel = 0, batches = 0;
  uint64_t sink = 0;
  bool was_measuring = false;
  while (!sh->stop.load(std::memory_order_relaxed)) {
    const uint64_t t0 = now_ns();
    const uint32_t n = dev->rx(buf);
    const uint64_t t1 = now_ns();
    if (n == 0) {
      if (wait) (void)dev->wait(1);
      continue;
    }
    for (uint32_t i = 0; i < n; ++i) {
      sink += buf[i].data[0];  // touch the frame like a consumer would
      bytes += buf[i].len;
    }
    const uint64_t t2 = now_ns();
    dev->release({buf.data(), n});
    const uint64_t t3 = now_ns();
    const bool m = sh->measuring.load(std::memory_order_relaxed);
    if (m != was_measuring) {
      rx = bytes = t_rx = t_rel = batches = 0;
      was_measuring = m;
    }
    rx += n;
    t_rx += t1 - t0;
    t_rel += t3 - t2;
    ++batches;
    if (m) {
      sh->rx.store(rx, std::memory_order_relaxed);
      sh->rx_bytes.store(bytes, std::memory_order_relaxed);
      sh->ns_rx.store(t_rx, std::memory_order_relaxed);
      sh->ns_release.store(t_rel, std::memory_order_relaxed);
      sh->rx_batches.store(batches, std::memory_order_relaxed);
      sh->rx_wakeups.store(dev->counters().rx_wakeups, std::memory_order_relaxed);
    }
  }
  if (sink == 1) std::fprintf(stderr, " ");
}

void tx_loop(Device* dev, Shared* sh, int cpu, uint32_t batch, const std::vector<uint8_t>* frame) {
  pin(cpu);
  sh->tid_tx = gettid();
  XskSocket& s = dev->sockets()[0];
  std::vector<TxFrame> f(batch);
  const uint32_t len = static_cast<uint32_t>(frame->size());
  uint64_t tx = 0, t_reap = 0, t_res = 0, t_wr = 0, t_sub = 0, t_kick = 0, batches = 0;
  uint64_t kicks0 = 0, polls = 0;
  bool was_measuring = false;
  while (!sh->stop.load(std::memory_order_relaxed)) {
    const uint64_t t0 = now_ns();
    s.reap();
    const uint64_t t1 = now_ns();
    const uint32_t k = s.tx_reserve(f);
    const uint64_t t2 = now_ns();
    if (k == 0) {
      // Nothing reservable: the kernel holds every frame or the TX ring is
      // full (the receiver pushes back). Kick, and wait in poll() if that
      // does not drain the ring, as an engine would.
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
    const uint64_t t3 = now_ns();
    s.tx_submit({f.data(), k}, false);
    const uint64_t t4 = now_ns();
    s.flush_tx();
    const uint64_t t5 = now_ns();
    const bool m = sh->measuring.load(std::memory_order_relaxed);
    if (m != was_measuring) {
      tx = t_reap = t_res = t_wr = t_sub = t_kick = batches = polls = 0;
      kicks0 = s.counters().tx_kicks;
      was_measuring = m;
    }
    tx += k;
    t_reap += t1 - t0;
    t_res += t2 - t1;
    t_wr += t3 - t2;
    t_sub += t4 - t3;
    t_kick += t5 - t4;
    ++batches;
    if (m) {
      sh->tx.store(tx, std::memory_order_relaxed);
      sh->ns_reap.store(t_reap, std::memory_order_relaxed);
      sh->ns_reserve.store(t_res, std::memory_order_relaxed);
      sh->ns_write.store(t_wr, std::memory_order_relaxed);
      sh->ns_submit.store(t_sub, std::memory_order_relaxed);
      sh->ns_kick.store(t_kick, std::memory_order_relaxed);
      sh->tx_batches.store(batches, std::memory_order_relaxed);
      sh->kicks.store(s.counters().tx_kicks - kicks0 + polls, std::memory_order_relaxed);
    }
  }
}

// Live-frames generator: XDP_TX of the frame out of A's veth, in ns A.
void gen_loop(const Topology* t, int prog_fd, Shared* sh, int cpu,
              const std::vector<uint8_t>* frame) {
  pin(cpu);
  sh->tid_tx = gettid();
  auto ns = must(t->enter_a(), "entering namespace A (generator)");
  xdp_md ctx{};
  ctx.ingress_ifindex = if_nametoindex(t->pairs()[0].a_if.c_str());
  ctx.rx_queue_index = 0;
  ctx.data_end = static_cast<uint32_t>(frame->size());  // the kernel wants the frame size here
  const int repeat = 1 << 15;
  uint64_t done = 0;
  bool was_measuring = false;
  while (!sh->stop.load(std::memory_order_relaxed)) {
    LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = frame->data(),
                .data_size_in = static_cast<uint32_t>(frame->size()), .ctx_in = &ctx,
                .ctx_size_in = sizeof(ctx), .repeat = repeat, .flags = BPF_F_TEST_XDP_LIVE_FRAMES,
                .batch_size = 64);
    const int err = bpf_prog_test_run_opts(prog_fd, &opts);
    if (err) die("BPF_PROG_TEST_RUN live frames: " + std::string(strerror(-err)));
    const bool m = sh->measuring.load(std::memory_order_relaxed);
    if (m != was_measuring) {
      done = 0;
      was_measuring = m;
    }
    done += repeat;
    if (m) sh->gen.store(done, std::memory_order_relaxed);
  }
}

std::vector<uint8_t> make_frame(const Topology& t, uint32_t size) {
  std::vector<uint8_t> f(std::max<uint32_t>(size, xsktest::kMinFrame));
  const auto& v = t.pairs()[0];
  xsktest::write_frame(f.data(), static_cast<uint32_t>(f.size()), v.b_mac, v.a_mac, 1, 0, 0, 7);
  return f;
}

DeviceConfig dev_cfg(const std::string& ifname) {
  DeviceConfig c;
  c.ports.push_back({ifname});
  c.umem.frame_count = 8192;
  c.umem.frame_size = 4096;
  c.watch_links = false;
  return c;
}

// Lets the threads run: warm-up, then a measured window.
// Lets the threads run: warm-up, then a measured window. Returns the
// window's length; cpu_tx/cpu_rx get the CPU time each thread had in it.
double measure(Shared& sh, const Options& o, uint64_t* cpu_tx, uint64_t* cpu_rx) {
  std::this_thread::sleep_for(std::chrono::duration<double>(o.warmup));
  const pid_t ttx = sh.tid_tx, trx = sh.tid_rx;
  const uint64_t c0tx = thread_cpu_ns(ttx), c0rx = thread_cpu_ns(trx);
  sh.measuring.store(true);
  const uint64_t t0 = now_ns();
  std::this_thread::sleep_for(std::chrono::duration<double>(o.seconds));
  const uint64_t t1 = now_ns();
  sh.measuring.store(false);
  *cpu_tx = thread_cpu_ns(ttx) - c0tx;
  *cpu_rx = thread_cpu_ns(trx) - c0rx;
  sh.stop.store(true);
  return static_cast<double>(t1 - t0) / 1e9;
}

Sample collect(const Shared& sh, double secs, uint64_t cpu_tx, uint64_t cpu_rx) {
  Sample s;
  s.secs = secs;
  s.cpu_tx = cpu_tx;
  s.cpu_rx = cpu_rx;
  s.tx = sh.tx;
  s.rx = sh.rx;
  s.rx_bytes = sh.rx_bytes;
  s.gen = sh.gen;
  s.kicks = sh.kicks;
  s.rx_wakeups = sh.rx_wakeups;
  s.ns_reap = sh.ns_reap;
  s.ns_reserve = sh.ns_reserve;
  s.ns_write = sh.ns_write;
  s.ns_submit = sh.ns_submit;
  s.ns_kick = sh.ns_kick;
  s.tx_batches = sh.tx_batches;
  s.ns_rx = sh.ns_rx;
  s.ns_release = sh.ns_release;
  s.rx_batches = sh.rx_batches;
  return s;
}

// Receiver B with the redirect program (or the drop program for gen).
struct Receiver {
  Device dev;
  std::unique_ptr<TestProg> prog;
};

Receiver open_receiver(const Topology& t, bool busy_poll, bool drop) {
  auto ns = must(t.enter_b(), "entering namespace B");
  Receiver r;
  DeviceConfig c = dev_cfg(t.pairs()[0].b_if);
  c.socket.busy_poll = busy_poll;
  c.socket.busy_poll_usec = 50;
  c.socket.busy_poll_budget = 64;
  r.dev = must(Device::open(c), "opening device B");
  r.prog = must(TestProg::load(), "loading xsk_test");
  must(r.prog->attach(t.pairs()[0].b_if, 0, drop ? r.prog->drop_fd() : -1), "attaching on B");
  must(r.prog->set_cfg({}), "cfg");
  must(r.dev.insert_into_xskmap(r.prog->xsks_fd(), [](uint16_t, uint32_t q) { return q; }),
       "XSKMAP");
  return r;
}

// B's NAPI settings for a variant, reverted on scope exit. veth has NAPI
// instances only while an XDP program is attached: apply after attaching.
// Pins the NAPI kthreads of interface ifname ("napi/<ifname>-<id>") to cpu.
void pin_napi_threads(const std::string& ifname, int cpu) {
  const std::string prefix = "napi/" + ifname + "-";
  DIR* d = opendir("/proc");
  if (!d) return;
  while (dirent* e = readdir(d)) {
    const pid_t pid = static_cast<pid_t>(std::atoi(e->d_name));
    if (pid <= 0) continue;
    FILE* f = std::fopen(("/proc/" + std::string(e->d_name) + "/comm").c_str(), "r");
    if (!f) continue;
    char comm[64] = {};
    const bool got = std::fgets(comm, sizeof(comm), f) != nullptr;
    std::fclose(f);
    if (!got || std::strncmp(comm, prefix.c_str(), prefix.size()) != 0) continue;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    sched_setaffinity(pid, sizeof(set), &set);
  }
  closedir(d);
}

struct Knobs {
  const Topology* t;
  Variant v;
  Knobs(const Topology& topo, const Variant& var, int rx_cpu) : t(&topo), v(var) {
    if (v.threaded_napi) {
      sysfs_b(*t, "threaded", "1");
      pin_napi_threads(t->pairs()[0].b_if, rx_cpu);
    }
    if (v.busy_poll) {
      sysfs_b(*t, "napi_defer_hard_irqs", "2");
      sysfs_b(*t, "gro_flush_timeout", "200000");
    }
  }
  ~Knobs() {
    if (v.threaded_napi) sysfs_b(*t, "threaded", "0");
    if (v.busy_poll) {
      sysfs_b(*t, "napi_defer_hard_irqs", "0");
      sysfs_b(*t, "gro_flush_timeout", "0");
    }
  }
};

Sample run_txrx(const Topology& t, const Options& o, uint32_t size, const Variant& v) {
  Receiver r = open_receiver(t, v.busy_poll, v.rx_drop);
  Knobs knobs(t, v, o.rx_cpu);
  Device a;
  {
    auto ns = must(t.enter_a(), "entering namespace A");
    DeviceConfig c = dev_cfg(t.pairs()[0].a_if);
    c.socket.tx_budget = v.tx_budget;
    a = must(Device::open(c), "opening device A");
  }
  const std::vector<uint8_t> frame = make_frame(t, size);
  Shared sh;
  std::thread rx;
  if (!v.rx_drop) rx = std::thread(rx_loop, &r.dev, &sh, o.rx_cpu, o.batch, v.rx_wait);
  std::thread tx(tx_loop, &a, &sh, o.tx_cpu, o.batch, &frame);
  uint64_t cpu_tx = 0, cpu_rx = 0;
  const double secs = measure(sh, o, &cpu_tx, &cpu_rx);
  tx.join();
  if (rx.joinable()) rx.join();
  Sample s = collect(sh, secs, cpu_tx, cpu_rx);
  if (v.rx_drop) {  // what B's XDP saw and dropped stands for "received"
    s.rx = s.tx;
    s.rx_bytes = s.tx * frame.size();
  }
  if (auto k = r.dev.kernel_stats()) s.rx_dropped = k->rx_dropped + k->rx_ring_full;
  return s;
}

enum class GenSink {
  kXsk,     // B redirects to AF_XDP, the RX thread consumes (AF_XDP RX alone)
  kDropB,   // B's XDP drops (generator + veth + B's XDP, no AF_XDP)
  kSource,  // the generator's own program drops (frame generation alone)
};

Sample run_gen(const Topology& t, const Options& o, uint32_t size, GenSink sink, const Variant& v) {
  Receiver r = open_receiver(t, v.busy_poll, sink == GenSink::kDropB);
  Knobs knobs(t, v, o.rx_cpu);
  auto gen_prog = must(TestProg::load(), "loading the generator");
  {
    // Live frames need A's veth to have its XDP rx queue registered, which
    // veth does while a program is attached. Attach the very program the
    // generator runs: BPF_PROG_TEST_RUN with repeat > 1 adds a program that
    // is not attached anywhere to the XDP dispatcher and removes it again,
    // two synchronize_rcu() per call (~30 ms here), which capped this
    // generator at ~1.2 Mpps (Documentation/xdp-tx.md).
    auto ns = must(t.enter_a(), "entering namespace A");
    must(gen_prog->attach(t.pairs()[0].a_if, 0,
                          sink == GenSink::kSource ? gen_prog->drop_fd() : gen_prog->tx_fd()),
         "attaching on A");
  }
  const std::vector<uint8_t> frame = make_frame(t, size);
  Shared sh;
  std::thread rx;
  if (sink == GenSink::kXsk) rx = std::thread(rx_loop, &r.dev, &sh, o.rx_cpu, o.batch, v.rx_wait);
  std::thread gen(gen_loop, &t, sink == GenSink::kSource ? gen_prog->drop_fd() : gen_prog->tx_fd(),
                  &sh, o.tx_cpu, &frame);
  uint64_t cpu_tx = 0, cpu_rx = 0;
  const double secs = measure(sh, o, &cpu_tx, &cpu_rx);
  gen.join();
  if (rx.joinable()) rx.join();
  Sample s = collect(sh, secs, cpu_tx, cpu_rx);
  if (auto k = r.dev.kernel_stats()) s.rx_dropped = k->rx_dropped + k->rx_ring_full;
  return s;
}

// GB/s of memcpy on one core: blocks of `block` bytes over `span` bytes.
double run_memcpy(int cpu, size_t block, size_t span, double seconds) {
  double gbps = 0;
  std::thread th([&] {
    pin(cpu);
    std::vector<uint8_t> src(span, 0x5a), dst(span, 0);
    const size_t blocks = span / block;
    uint64_t bytes = 0;
    const uint64_t t0 = now_ns();
    const uint64_t end = t0 + static_cast<uint64_t>(seconds * 1e9);
    uint64_t t = t0;
    size_t i = 0;
    while (t < end) {
      for (int k = 0; k < 256; ++k) {
        std::memcpy(dst.data() + i * block, src.data() + i * block, block);
        if (++i == blocks) i = 0;
      }
      bytes += 256 * block;
      t = now_ns();
      asm volatile("" ::"r"(dst.data()) : "memory");
    }
    gbps = bytes / ((t - t0) / 1e9) / 1e9;
  });
  th.join();
  return gbps;
}

std::string loadavg() {
  FILE* f = std::fopen("/proc/loadavg", "r");
  if (!f) return "?";
  char buf[64] = {};
  if (!std::fgets(buf, sizeof(buf), f)) buf[0] = 0;
  std::fclose(f);
  std::string s(buf);
  // "1.00 0.50 0.25 2/300 123": keep the three averages
  size_t cut = 0;
  for (int sp = 0; cut < s.size(); ++cut)
    if (s[cut] == ' ' && ++sp == 3) break;
  return s.substr(0, cut);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

std::vector<uint32_t> parse_sizes(const char* s) {
  std::vector<uint32_t> out;
  for (const char* p = s; *p;) {
    out.push_back(static_cast<uint32_t>(std::strtoul(p, nullptr, 10)));
    p = std::strchr(p, ',');
    if (!p) break;
    ++p;
  }
  return out;
}

void usage() {
  std::puts(
      "usage: xsk_bench [--seconds S] [--reps N] [--sizes 64,1500,3072] [--batch N]\n"
      "                 [--tx-cpu C] [--rx-cpu C] [--no-variants] [--only txrx|rx|gen|memcpy]\n"
      "Needs root. Makes its own namespaces and veth pair; prints medians over N\n"
      "interleaved repetitions.");
}

}  // namespace

int main(int argc, char** argv) {
  mrc::bench::g_prog = "xsk_bench";
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
      o.sizes = parse_sizes(next());
    else if (a == "--batch")
      o.batch = static_cast<uint32_t>(std::atoi(next()));
    else if (a == "--tx-cpu")
      o.tx_cpu = std::atoi(next());
    else if (a == "--rx-cpu")
      o.rx_cpu = std::atoi(next());
    else if (a == "--no-variants")
      o.variants = false;
    else if (a == "--only") {
      const std::string m = next();
      o.txrx = m == "txrx";
      o.rx = m == "rx";
      o.gen = m == "gen";
      o.memcpy_ = m == "memcpy";
    } else if (a == "-h" || a == "--help") {
      usage();
      return 0;
    } else {
      usage();
      return 2;
    }
  }
  const std::string load_start = loadavg();
  const std::string why = xsktest::skip_reason();
  if (!why.empty()) die(why);
  const uint32_t max_size = *std::max_element(o.sizes.begin(), o.sizes.end());
  // veth with native XDP takes up to ~3500-byte MTUs without multi-buffer.
  const uint32_t mtu = std::max<uint32_t>(1500, max_size - 14);
  Topology t = must(Topology::create(1, 1, mtu), "making namespaces and veth");
  std::printf(
      "xsk_bench: veth pair in %s/%s, MTU %u, batch %u, TX cpu %d, RX cpu %d, "
      "%.1f s x %d reps (medians)\n",
      t.ns_a().c_str(), t.ns_b().c_str(), mtu, o.batch, o.tx_cpu, o.rx_cpu, o.seconds, o.reps);

  std::vector<Variant> variants = {{"copy, budget=ring"}};
  if (o.variants) {
    variants.push_back({"copy, budget=32", 32});
    variants.push_back({"rx busy-poll", 0, true});
    variants.push_back({"rx threaded NAPI", 0, false, true});
    variants.push_back({"rx thr. NAPI+poll", 0, false, true, false, true});
    variants.push_back({"TX only (B drops)", 0, false, false, true});
  }
  std::vector<Variant> rx_variants = {variants[0]};
  if (o.variants)
    for (const Variant& v : variants)
      if (v.busy_poll || v.threaded_napi) rx_variants.push_back(v);
  rx_variants[0].name = "softirq on gen core";

  // results[key] = samples over repetitions
  std::map<std::string, std::vector<Sample>> res;
  std::map<std::string, std::vector<double>> mem;
  for (int rep = 0; rep < o.reps; ++rep) {
    for (uint32_t size : o.sizes) {
      if (o.txrx)
        for (const Variant& v : variants)
          res["txrx|" + std::to_string(size) + "|" + v.name].push_back(run_txrx(t, o, size, v));
      if (o.rx)
        for (const Variant& v : rx_variants)
          res["rx|" + std::to_string(size) + "|" + v.name].push_back(
              run_gen(t, o, size, GenSink::kXsk, v));
      if (o.gen) {
        res["gen|" + std::to_string(size)].push_back(
            run_gen(t, o, size, GenSink::kDropB, variants[0]));
        res["src|" + std::to_string(size)].push_back(
            run_gen(t, o, size, GenSink::kSource, variants[0]));
      }
    }
    if (o.memcpy_) {
      mem["3 KB blocks, 64 MiB (memory)"].push_back(run_memcpy(o.tx_cpu, 3072, 64 << 20, 1.0));
      mem["3 KB blocks, 256 KiB (cache)"].push_back(run_memcpy(o.tx_cpu, 3072, 256 << 10, 1.0));
    }
    std::fprintf(stderr, "repetition %d/%d done\n", rep + 1, o.reps);
  }

  auto med = [](const std::vector<Sample>& v, auto f) {
    std::vector<double> x;
    for (const Sample& s : v) x.push_back(f(s));
    return median(x);
  };
  auto tx_cpu = [](const Sample& x) { return 100.0 * x.cpu_tx / (x.secs * 1e9); };
  auto rx_cpu = [](const Sample& x) { return 100.0 * x.cpu_rx / (x.secs * 1e9); };
  auto rx_ns = [](const Sample& x) { return x.rx ? double(x.ns_rx + x.ns_release) / x.rx : 0; };
  if (o.txrx) {
    std::printf("\nAF_XDP TX -> veth -> XDP redirect -> AF_XDP RX (copy mode)\n");
    std::printf("%-5s %-17s %7s %7s %7s %8s %5s %5s | %6s %6s %6s %6s %7s %6s | %8s %8s\n", "size",
                "variant", "rx Mpps", "Gbit/s", "tx Mpps", "rx drop", "tx%", "rx%", "reap", "resrv",
                "write", "submit", "kick", "rx", "sys/fr", "wake/fr");
    for (uint32_t size : o.sizes)
      for (const Variant& v : variants) {
        const auto& s = res["txrx|" + std::to_string(size) + "|" + v.name];
        auto per_tx = [](uint64_t ns, const Sample& x) { return x.tx ? double(ns) / x.tx : 0; };
        std::printf(
            "%-5u %-17s %7.3f %7.2f %7.3f %8.0f %5.0f %5.0f | %6.1f %6.1f %6.1f %6.1f %7.1f %6.1f "
            "| "
            "%8.4f %8.4f\n",
            size, v.name.c_str(), med(s, [](const Sample& x) { return x.mpps(); }),
            med(s, [](const Sample& x) { return x.gbps(); }),
            med(s, [](const Sample& x) { return x.tx / x.secs / 1e6; }),
            med(s, [](const Sample& x) { return double(x.rx_dropped); }), med(s, tx_cpu),
            med(s, rx_cpu), med(s, [&](const Sample& x) { return per_tx(x.ns_reap, x); }),
            med(s, [&](const Sample& x) { return per_tx(x.ns_reserve, x); }),
            med(s, [&](const Sample& x) { return per_tx(x.ns_write, x); }),
            med(s, [&](const Sample& x) { return per_tx(x.ns_submit, x); }),
            med(s, [&](const Sample& x) { return per_tx(x.ns_kick, x); }), med(s, rx_ns),
            med(s, [](const Sample& x) { return x.tx ? double(x.kicks) / x.tx : 0; }),
            med(s, [](const Sample& x) { return x.rx ? double(x.rx_wakeups) / x.rx : 0; }));
      }
    std::printf(
        "Gbit/s counts Ethernet frame bytes (no FCS/preamble). tx%%/rx%%: CPU share the sender "
        "and\n"
        "receiver threads got (softirq work done in their syscalls included). Stage columns: ns "
        "per\n"
        "frame on the TX thread (kick = sendto, which in copy mode also runs the veth and the\n"
        "receiver's XDP); rx: ns per frame in rx()+release() on the RX thread. sys/fr: TX\n"
        "syscalls (sendto + poll) per frame; wake/fr: RX recvfrom per frame.\n");
  }
  if (o.rx || o.gen) {
    std::printf(
        "\nLive-frames generator (BPF_PROG_TEST_RUN + BPF_F_TEST_XDP_LIVE_FRAMES, XDP_TX out of "
        "A's veth)\n");
    std::printf("%-5s %-34s %7s %7s %8s %9s %5s %5s %7s\n", "size", "receiver", "rx Mpps", "Gbit/s",
                "offered", "rx drop", "gen%", "rx%", "rx ns");
    for (uint32_t size : o.sizes) {
      for (const Variant& v : rx_variants) {
        if (!o.rx) break;
        const auto& s = res["rx|" + std::to_string(size) + "|" + v.name];
        std::printf("%-5u %-34s %7.3f %7.2f %8.3f %9.0f %5.0f %5.0f %7.1f\n", size,
                    ("AF_XDP RX, " + v.name).c_str(),
                    med(s, [](const Sample& x) { return x.mpps(); }),
                    med(s, [](const Sample& x) { return x.gbps(); }),
                    med(s, [](const Sample& x) { return x.gen / x.secs / 1e6; }),
                    med(s, [](const Sample& x) { return double(x.rx_dropped); }), med(s, tx_cpu),
                    med(s, rx_cpu), med(s, rx_ns));
      }
      if (o.gen) {
        const auto& s = res["gen|" + std::to_string(size)];
        std::printf("%-5u %-34s %7s %7.2f %8.3f %9s %5.0f %5s %7s\n", size,
                    "XDP_DROP on B (no AF_XDP)", "-",
                    med(s, [&](const Sample& x) { return x.gen * 8.0 * size / x.secs / 1e9; }),
                    med(s, [](const Sample& x) { return x.gen / x.secs / 1e6; }), "-",
                    med(s, tx_cpu), "-", "-");
        const auto& d = res["src|" + std::to_string(size)];
        std::printf("%-5u %-34s %7s %7.2f %8.3f %9s %5.0f %5s %7s\n", size,
                    "XDP_DROP at the generator", "-",
                    med(d, [&](const Sample& x) { return x.gen * 8.0 * size / x.secs / 1e9; }),
                    med(d, [](const Sample& x) { return x.gen / x.secs / 1e6; }), "-",
                    med(d, tx_cpu), "-", "-");
      }
    }
  }
  if (o.memcpy_) {
    std::printf("\nmemcpy, one core (cpu %d)\n", o.tx_cpu);
    for (const auto& [k, v] : mem) std::printf("  %-32s %6.2f GB/s\n", k.c_str(), median(v));
  }
  std::printf("\nload average at start: %s, at end: %s\n", load_start.c_str(), loadavg().c_str());
  return 0;
}
