// The engine thread's scheduling (DeviceOptions::engine_sched,
// $MRC_ENGINE_SCHED, mrc-serviced --sched; Documentation/api.md, "Engine
// thread scheduling", and service.md section 6). The engine thread applies
// its mode when it starts and reports what it got; Context::open waits for
// that report. A mode the process may not have (no CAP_SYS_NICE) falls back
// to the next weaker one, and the reason says so.
#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "core/engine_keys.hpp"
#include "lib/context_impl.hpp"

namespace mrc {

Result<EngineSched> parse_engine_sched(std::string_view name) {
  for (EngineSched s : {EngineSched::kDefault, EngineSched::kNormal, EngineSched::kNice,
                        EngineSched::kFifo, EngineSched::kDedicated})
    if (name == to_string(s)) return s;
  return make_error(EINVAL, "engine scheduling mode '" + std::string(name) +
                                "' is not one of default, normal, nice, fifo, dedicated");
}

namespace {

std::string err_name(int e) {
  const char* n = strerrorname_np(e);
  return n ? n : std::to_string(e);
}

}  // namespace

// The mode asked for (the option; $MRC_ENGINE_SCHED for kDefault; kNice
// when neither names one), checked against the other options.
Status Context::Impl::resolve_sched() {
  const DeviceOptions& o = opts;
  EngineSched s = o.engine_sched;
  std::string from = "DeviceOptions::engine_sched";
  if (s == EngineSched::kDefault) {
    if (const char* e = std::getenv("MRC_ENGINE_SCHED"); e && *e) {
      auto p = parse_engine_sched(e);
      if (!p)
        return make_error(EINVAL,
                          "open: MRC_ENGINE_SCHED=" + std::string(e) + ": " + p.error().context);
      s = *p;
      from = "MRC_ENGINE_SCHED";
    }
  }
  if (s == EngineSched::kDefault) s = EngineSched::kNice;
  uint64_t co = o.engine_coalesce_us;
  std::string co_from = "engine_coalesce_us " + std::to_string(co);
  if (!co) {
    if (const char* e = std::getenv("MRC_ENGINE_COALESCE_US"); e && *e) {
      co = core::parse_whole(e).value_or(~uint64_t(0));
      co_from = "MRC_ENGINE_COALESCE_US=" + std::string(e);
    }
  }
  if (co > 1000)
    return make_error(EINVAL, "open: " + co_from + " is not a number of microseconds in 0..1000");
  coalesce_ns = core::Time(co) * 1000;
  if (o.engine_nice < -20 || o.engine_nice > 19)
    return make_error(EINVAL,
                      "open: engine_nice " + std::to_string(o.engine_nice) + " is outside -20..19");
  if (o.engine_rt_priority < 1 || o.engine_rt_priority > 99)
    return make_error(EINVAL, "open: engine_rt_priority " + std::to_string(o.engine_rt_priority) +
                                  " is outside 1..99");
  if (s == EngineSched::kDedicated && o.engine_cpu < 0)
    return make_error(EINVAL, "open: engine scheduling 'dedicated' (" + from +
                                  ") needs engine_cpu, the core the engine thread owns");
  sched_want = s;
  return {};
}

// In the engine thread, before its first pass.
void Context::Impl::apply_sched() {
  const pid_t tid = gettid();
  const std::string nice_s = "nice " + std::to_string(opts.engine_nice);
  auto raise_nice = [&](std::string& why) {
    if (setpriority(PRIO_PROCESS, id_t(tid), opts.engine_nice) == 0) return true;
    why = nice_s + " refused (" + err_name(errno) + ": needs CAP_SYS_NICE or RLIMIT_NICE)";
    return false;
  };
  auto normal = [&](const std::string& why) {
    errno = 0;
    const int n = getpriority(PRIO_PROCESS, id_t(tid));
    sched_got = EngineSched::kNormal;
    sched_why = "normal: SCHED_OTHER at nice " + std::to_string(errno ? 0 : n) +
                (why.empty() ? "" : "; " + why);
  };
  std::string why;
  switch (sched_want) {
    case EngineSched::kDefault:
    case EngineSched::kNormal:
      normal("");
      break;
    case EngineSched::kNice:
    case EngineSched::kDedicated:
      if (!raise_nice(why)) {
        normal(std::string(to_string(sched_want)) + " asked, " + why);
        if (sched_want == EngineSched::kDedicated) {
          // Pinned and polling still: dedicated, at the process's weight.
          sched_got = EngineSched::kDedicated;
          sched_why = "dedicated: CPU " + std::to_string(opts.engine_cpu) +
                      ", never sleeps, SCHED_OTHER at the process's nice (" + why + ")";
        }
        break;
      }
      sched_got = sched_want;
      sched_why = sched_want == EngineSched::kNice
                      ? "nice: SCHED_OTHER at " + nice_s
                      : "dedicated: CPU " + std::to_string(opts.engine_cpu) +
                            ", never sleeps, SCHED_OTHER at " + nice_s;
      break;
    case EngineSched::kFifo: {
      const bool niced = raise_nice(why);
      sched_param sp{};
      sp.sched_priority = opts.engine_rt_priority;
      const int r = pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp);
      if (r == 0) {
        sched_got = EngineSched::kFifo;
        rt_on = true;
        sched_why = "fifo: SCHED_FIFO priority " + std::to_string(opts.engine_rt_priority) +
                    ", SCHED_OTHER at " + (niced ? nice_s : "the process's nice") + " after " +
                    std::to_string(opts.engine_rt_burst_us) + " us of work without a sleep";
        break;
      }
      const std::string fifo_why =
          "SCHED_FIFO refused (" + err_name(r) + ": needs CAP_SYS_NICE or RLIMIT_RTPRIO)";
      if (niced) {
        sched_got = EngineSched::kNice;
        sched_why = "nice: SCHED_OTHER at " + nice_s + "; fifo asked, " + fifo_why;
      } else {
        normal("fifo asked, " + fifo_why + "; " + why);
      }
      break;
    }
  }
}

// kFifo: real-time while serving bursts, the raised CFS weight during a
// long one (on = false), real-time again after the next sleep. One
// syscall per change, not per pass.
void Context::Impl::set_rt(bool on) {
  sched_param sp{};
  sp.sched_priority = on ? opts.engine_rt_priority : 0;
  if (pthread_setschedparam(pthread_self(), on ? SCHED_FIFO : SCHED_OTHER, &sp) == 0) {
    rt_on = on;
    if (!on) rt_demotions.fetch_add(1, std::memory_order_relaxed);
  }
}

EngineSched Context::engine_sched() const { return impl_->sched_got; }
const std::string& Context::engine_sched_reason() const { return impl_->sched_why; }

}  // namespace mrc
