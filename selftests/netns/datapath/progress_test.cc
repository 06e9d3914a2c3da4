// Application progress (DeviceOptions::progress = kApplication) over real
// AF_XDP: the threads that poll run the engine, the engine thread stands in
// only when they stop. Every transfer is verified byte for byte.
#include <dirent.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "netns/datapath/datapath_fixture.hpp"

namespace mrc {
namespace {

using dptest::Clock;

class AppProgress : public dptest::DatapathFixture {
 protected:
  AppProgress() { progress_ = Progress::kApplication; }

  // Polls both hosts (each poll is a pass of that host's engine) until
  // `pred` holds; completions of host s go to out[s].
  bool drive_both(std::vector<Wc> (&out)[2], const std::function<bool()>& pred,
                  std::chrono::milliseconds limit) {
    const auto end = Clock::now() + scaled(limit);
    Wc wc[64];
    while (Clock::now() < end) {
      for (int s = 0; s < 2; s++) {
        auto n = h_[s].cq->poll(wc);
        if (!n.ok()) return false;
        out[s].insert(out[s].end(), wc, wc + *n);
      }
      if (pred()) return true;
    }
    return pred();
  }

  // Host 0 writes 1 MiB into host 1 (16 WRITEs of 64 KiB) and polls only
  // itself until all complete; host 1's application does not poll, so its
  // engine thread must acknowledge and place. Data verified byte for byte.
  void write_to_a_host_that_does_not_poll(Pair& p, uint8_t seed) {
    constexpr size_t kLen = 1 << 20;
    std::vector<uint8_t> src(kLen), dst(kLen, 0);
    fill(src, seed);
    auto ms = reg(0, src, false), md = reg(1, dst, true);
    for (int i = 0; i < 16; i++)
      ASSERT_TRUE(write(*p.q[0], ms, i * 65536, 65536, md, i * 65536, i).ok());
    std::vector<Wc> s;
    ASSERT_TRUE(wait(
        0, s, [&] { return s.size() == 16; }, std::chrono::seconds(30)))
        << s.size() << " of 16";
    for (const auto& w : s) EXPECT_EQ(w.status, core::kWcSuccess) << core::to_string(w.status);
    EXPECT_EQ(0, std::memcmp(src.data(), dst.data(), kLen));
  }
};

class ThreadProgress : public dptest::DatapathFixture {};

// DeviceOptions::engine_sched = kFifo on both hosts.
class FifoEngine : public dptest::DatapathFixture {
 protected:
  FifoEngine() { engine_sched_ = EngineSched::kFifo; }
};

// The scheduling policy and nice value of every thread of this process.
struct TaskSched {
  int policy, nice;
};
std::vector<TaskSched> task_scheds() {
  std::vector<TaskSched> out;
  DIR* d = opendir("/proc/self/task");
  if (!d) return out;
  while (dirent* e = readdir(d)) {
    const int tid = std::atoi(e->d_name);
    if (tid <= 0) continue;
    errno = 0;
    const int nice = getpriority(PRIO_PROCESS, id_t(tid));
    const int pol = sched_getscheduler(tid);
    if (pol >= 0 && !errno) out.push_back({pol, nice});
  }
  closedir(d);
  return out;
}
size_t count_tasks(int policy, int nice) {
  size_t n = 0;
  for (const auto& t : task_scheds()) n += t.policy == policy && t.nice == nice;
  return n;
}

// DeviceOptions::idle_spin_us: the engine thread keeps polling that long
// before it sleeps. Transfers are unchanged; an idle thread makes many
// passes per sleep (the default makes at most 64 idle passes).
class SpinningThread : public dptest::DatapathFixture {
 protected:
  SpinningThread() { idle_spin_us_ = 5000; }
};

TEST_F(SpinningThread, TransfersAndPollsBeforeSleeping) {
  Pair p = connect();
  writes_placed_byte_for_byte(p, {1, 1 << 20, 16 << 20});
  ASSERT_FALSE(HasFatalFailure());
  // Idle now: wait for a few sleeps of host 0's engine thread.
  const auto s0 = h_[0].ctx->progress_stats();
  const auto end = Clock::now() + scaled(std::chrono::seconds(10));
  while (h_[0].ctx->progress_stats().thread_sleeps < s0.thread_sleeps + 3 && Clock::now() < end)
    std::this_thread::yield();
  const auto s1 = h_[0].ctx->progress_stats();
  ASSERT_GE(s1.thread_sleeps, s0.thread_sleeps + 3);
  const double per_sleep =
      double(s1.thread_passes - s0.thread_passes) / double(s1.thread_sleeps - s0.thread_sleeps);
  EXPECT_GT(per_sleep, 100) << "passes per sleep with a 5 ms spin";
}

// DeviceOptions::engine_coalesce_us: in a transfer the engine thread waits
// between passes instead of sleeping on its sockets (every byte placed as
// without it); a ping-pong of 8 B messages after an idle gap moves far less
// than 32 KiB per millisecond and never waits; idle, the thread sleeps on
// its sockets.
class CoalescingThread : public dptest::DatapathFixture {
 protected:
  CoalescingThread() { engine_coalesce_us_ = 30; }
  uint64_t waits() {
    return h_[0].ctx->progress_stats().coalesced_waits +
           h_[1].ctx->progress_stats().coalesced_waits;
  }
};

TEST_F(CoalescingThread, TransfersWaitBetweenPassesAndPingPongsDoNot) {
  Pair p = connect();
  writes_placed_byte_for_byte(p, {1, 1 << 20, 16 << 20, 64 << 20});
  ASSERT_FALSE(HasFatalFailure());
  const uint64_t bulk = waits();
  EXPECT_GT(bulk, 0u) << "no coalesced wait in 160 MiB of writes";
  // An idle gap longer than a measuring period (2 ms): the ping-pong's rate
  // is measured afresh.
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const uint64_t s0 = h_[0].ctx->progress_stats().thread_sleeps;
  const uint64_t w0 = waits();
  ping_pong(p, 200);
  ASSERT_FALSE(HasFatalFailure());
  EXPECT_EQ(waits(), w0) << "a ping-pong of 8 B messages waited between passes";
  EXPECT_GT(h_[0].ctx->progress_stats().thread_sleeps, s0) << "the engine thread never slept";
  std::printf("coalesced waits: %llu in the writes, %llu in the ping-pong\n",
              (unsigned long long)bulk, (unsigned long long)(waits() - w0));
}

// Messages of every size class in flight at once, WRITE-with-immediate on
// the last: data placed, completions in order, and the application threads
// (not the engine threads) ran the engine while they polled.
TEST_F(AppProgress, TransfersWhileTheApplicationPollsAndRunsTheEngine) {
  Pair p = connect();
  constexpr size_t kLen = 8 << 20;
  std::vector<uint8_t> src(kLen), dst(kLen, 0);
  fill(src, 11);
  auto ms = reg(0, src, false), md = reg(1, dst, true);
  ASSERT_TRUE(p.q[1]->post_recv(RecvWr{5, nullptr, 0}).ok());
  const auto before = h_[0].ctx->progress_stats();
  // 1 B, 4 KiB, 64 KiB and 1 MiB pieces, the last one with an immediate.
  const size_t pieces[] = {1, 4095, 4096, 65536, 1 << 20};
  size_t off = 0;
  uint64_t id = 0;
  while (off < kLen) {
    size_t len = std::min(pieces[id % 5], kLen - off);
    const bool last = off + len == kLen;
    ASSERT_TRUE(write(*p.q[0], ms, off, len, md, off, id++, last, last ? 0xabcd : 0).ok());
    off += len;
  }
  std::vector<Wc> c[2];
  ASSERT_TRUE(drive_both(
      c, [&] { return c[0].size() == id && c[1].size() == 1; }, std::chrono::seconds(60)))
      << c[0].size() << " of " << id << " send completions, " << c[1].size() << " receive";
  for (size_t i = 0; i < c[0].size(); i++) {
    ASSERT_EQ(c[0][i].status, core::kWcSuccess) << i << ": " << core::to_string(c[0][i].status);
    ASSERT_EQ(c[0][i].wr_id, i) << "send completions out of order";
  }
  EXPECT_EQ(c[1][0].wr_id, 5u);
  EXPECT_EQ(c[1][0].imm_data, 0xabcdu);
  EXPECT_EQ(0, std::memcmp(src.data(), dst.data(), kLen));
  const auto after = h_[0].ctx->progress_stats();
  EXPECT_GT(after.app_passes, before.app_passes);
  EXPECT_EQ(h_[0].ctx->progress_mode(), Progress::kApplication);
}

// Ping-pong of 8 B WRITE-with-immediate, as mrc_perf -l does: each side's
// receive completion leaves its ACK to the pass after the reply is posted,
// so both go out in one transmit (counted as tx_deferred).
TEST_F(AppProgress, PingPongRepliesCarryTheDeferredAcks) {
  Pair p = connect();
  ping_pong(p, 200);
  ASSERT_FALSE(HasFatalFailure());
  EXPECT_GT(h_[0].ctx->progress_stats().tx_deferred + h_[1].ctx->progress_stats().tx_deferred, 0u);
}

// The receiver's application never polls: its engine thread takes over
// after progress_idle_us, so the sender's WRITEs are acknowledged and placed.
TEST_F(AppProgress, TheEngineThreadStandsInWhenTheApplicationStopsPolling) {
  Pair p = connect();
  const auto b0 = h_[1].ctx->progress_stats();
  write_to_a_host_that_does_not_poll(p, 12);
  if (HasFatalFailure()) return;
  const auto b1 = h_[1].ctx->progress_stats();
  EXPECT_GT(b1.thread_passes, b0.thread_passes) << "the receiver's engine thread never ran";
  EXPECT_EQ(b1.app_passes, b0.app_passes) << "nobody polled the receiver";
}

// While an application thread keeps polling, the engine thread sleeps on
// its stand-aside timer, which the polls push out (it used to wake every
// progress_idle_us to look, taking the CPU from the poller); once the polls
// stop, the timer fires and the engine thread takes over.
TEST_F(AppProgress, APollingApplicationLeavesTheEngineThreadAsleep) {
  Pair p = connect();
  Wc wc[16];
  // 300 ms of polling on the receiver: about 300 wasted wake-ups of its
  // engine thread if it woke every progress_idle_us (1 ms) to look. On a
  // loaded machine the poller may be off its CPU for longer than that, and
  // the engine thread then rightly takes over (it does not count those).
  const auto w0 = h_[1].ctx->progress_stats();
  const auto end = Clock::now() + std::chrono::milliseconds(300);
  while (Clock::now() < end) ASSERT_TRUE(h_[1].cq->poll(wc).ok());
  const auto w1 = h_[1].ctx->progress_stats();
  EXPECT_LE(w1.stand_aside_checks - w0.stand_aside_checks, 15u)
      << "engine thread woken while the application polled";
  // The receiver stops polling: its engine thread must take over.
  write_to_a_host_that_does_not_poll(p, 13);
  if (HasFatalFailure()) return;
  const auto w2 = h_[1].ctx->progress_stats();
  EXPECT_GT(w2.thread_passes, w1.thread_passes) << "the receiver's engine thread never took over";
  EXPECT_EQ(w2.app_passes, w1.app_passes);
}

// progress() belongs to application progress: with the engine thread it is
// refused, as is a negative timeout.
TEST_F(ThreadProgress, ProgressIsRefusedWhenTheEngineThreadDrives) {
  auto r = h_[0].ctx->progress(0);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, EINVAL);
  EXPECT_EQ(h_[0].ctx->progress_mode(), Progress::kThread);
  EXPECT_EQ(h_[0].ctx->progress_stats().app_passes, 0u);
}

TEST_F(AppProgress, ProgressSleepsAtMostItsTimeoutAndRefusesANegativeOne) {
  auto bad = h_[0].ctx->progress(-1);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, EINVAL);
  // Nothing to do: one call sleeps on the sockets up to 20 ms, not longer
  // than the timeout (plus scheduling slack, scaled in the VM).
  const auto t0 = Clock::now();
  auto r = h_[0].ctx->progress(20);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_LT(Clock::now() - t0, scaled(std::chrono::milliseconds(1000)));
  EXPECT_GT(h_[0].ctx->progress_stats().app_passes, 0u);
}

// The default (EngineSched::kNice, as root): both engine threads run
// SCHED_OTHER at nice -10 and say so; the test's own thread keeps its nice.
TEST_F(ThreadProgress, TheDefaultRaisesTheEngineThreadsWeight) {
  if (std::getenv("MRC_ENGINE_SCHED")) GTEST_SKIP() << "MRC_ENGINE_SCHED is set";
  for (int s = 0; s < 2; s++) {
    EXPECT_EQ(h_[s].ctx->engine_sched(), EngineSched::kNice) << h_[s].ctx->engine_sched_reason();
    EXPECT_NE(h_[s].ctx->engine_sched_reason().find("nice -10"), std::string::npos)
        << h_[s].ctx->engine_sched_reason();
  }
  EXPECT_GE(count_tasks(SCHED_OTHER, -10), 2u);
  errno = 0;
  EXPECT_EQ(getpriority(PRIO_PROCESS, 0), 0);
}

// kFifo: both engine threads are SCHED_FIFO when idle, transfers verify,
// and after them (long bursts finish under SCHED_OTHER) the threads are
// real-time again once they have slept.
TEST_F(FifoEngine, RealTimeWhileIdleTransfersAndComesBackAfterLongBursts) {
  for (int s = 0; s < 2; s++)
    ASSERT_EQ(h_[s].ctx->engine_sched(), EngineSched::kFifo) << h_[s].ctx->engine_sched_reason();
  EXPECT_GE(count_tasks(SCHED_FIFO, -10), 2u);
  Pair p = connect();
  writes_placed_byte_for_byte(p, {1, 1 << 20, 16 << 20});
  ASSERT_FALSE(HasFatalFailure());
  const auto end = Clock::now() + scaled(std::chrono::seconds(5));
  while (count_tasks(SCHED_FIFO, -10) < 2 && Clock::now() < end)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_GE(count_tasks(SCHED_FIFO, -10), 2u);
  std::printf("rt_demotions: host 0 %llu, host 1 %llu\n",
              (unsigned long long)h_[0].ctx->progress_stats().rt_demotions,
              (unsigned long long)h_[1].ctx->progress_stats().rt_demotions);
}

}  // namespace
}  // namespace mrc
