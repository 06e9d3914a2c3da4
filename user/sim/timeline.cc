#include "sim/timeline.hpp"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>

namespace mrc::sim {
namespace {

using Kind = FaultAction::Kind;

constexpr uint64_t kKiB = 1024, kMiB = 1024 * 1024;

struct ActionName {
  std::string_view name;
  Kind kind;
};
constexpr ActionName kActions[] = {
    {"blackhole", Kind::kBlackhole}, {"up", Kind::kUp},       {"down", Kind::kDown},
    {"loss", Kind::kLoss},           {"trim", Kind::kTrim},   {"ecn", Kind::kEcn},
    {"rate", Kind::kRate},           {"delay", Kind::kDelay}, {"jitter", Kind::kJitter},
    {"reorder", Kind::kReorder},     {"dup", Kind::kDup},     {"corrupt", Kind::kCorrupt},
    {"queue", Kind::kQueue},         {"heal", Kind::kHeal},
};
constexpr std::string_view kActionList =
    "blackhole, up, down, loss P, trim BYTES|off, ecn BYTES|off, rate RATE, delay TIME, "
    "jitter TIME, reorder P TIME, dup P, corrupt P, queue BYTES, heal";
constexpr std::string_view kSelectorList =
    "all, plane P, path P/M, uplink H/P, downlink H/P, port H/P, host H";

std::string_view action_name(Kind k) {
  for (const auto& a : kActions)
    if (a.kind == k) return a.name;
  return "?";
}

std::string fmt_prob(double p) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, p);
  return std::string(buf, r.ptr);
}

std::string fmt_bytes(uint64_t v) {
  if (v == kOff) return "off";
  if (v != 0 && v % kMiB == 0) return std::to_string(v / kMiB) + "MiB";
  if (v != 0 && v % kKiB == 0) return std::to_string(v / kKiB) + "KiB";
  return std::to_string(v) + "B";
}

std::string fmt_rate(uint64_t bps) {
  if (bps == 0) return "inf";
  static constexpr std::pair<uint64_t, const char*> kUnits[] = {{1'000'000'000'000ull, "Tbps"},
                                                                {1'000'000'000ull, "Gbps"},
                                                                {1'000'000ull, "Mbps"},
                                                                {1'000ull, "Kbps"}};
  for (const auto& [m, u] : kUnits)
    if (bps % m == 0) return std::to_string(bps / m) + u;
  return std::to_string(bps) + "bps";
}

// "12", "2.5" times mult, exactly; false if malformed, fractional or too big.
bool scaled(std::string_view num, uint64_t mult, uint64_t& out) {
  if (num.empty()) return false;
  unsigned __int128 mant = 0;
  int frac = -1;
  size_t digits = 0;
  for (char c : num) {
    if (c == '.') {
      if (frac >= 0) return false;
      frac = 0;
      continue;
    }
    if (c < '0' || c > '9') return false;
    mant = mant * 10 + unsigned(c - '0');
    if (mant > (unsigned __int128)1 << 64) return false;  // keeps mant * mult in 128 bits
    digits++;
    if (frac >= 0) frac++;
  }
  if (!digits) return false;
  unsigned __int128 v = mant * mult;
  for (int i = 0; i < std::max(frac, 0); i++) {
    if (v % 10) return false;
    v /= 10;
  }
  if (v > ~uint64_t(0)) return false;
  out = uint64_t(v);
  return true;
}

// Splits "2.5ms" into "2.5" and "ms".
std::pair<std::string_view, std::string_view> split_num(std::string_view t) {
  size_t k = 0;
  while (k < t.size() && ((t[k] >= '0' && t[k] <= '9') || t[k] == '.')) k++;
  return {t.substr(0, k), t.substr(k)};
}

bool parse_duration(std::string_view t, Time& out) {
  auto [num, unit] = split_num(t);
  uint64_t mult;
  if (unit == "ns")
    mult = 1;
  else if (unit == "us")
    mult = kUs;
  else if (unit == "ms")
    mult = kMs;
  else if (unit == "s")
    mult = kSec;
  else
    return false;
  return scaled(num, mult, out);
}

bool parse_bytes(std::string_view t, bool allow_off, uint64_t& out) {
  if (t == "off") {
    if (!allow_off) return false;
    out = kOff;
    return true;
  }
  auto [num, unit] = split_num(t);
  uint64_t mult;
  if (unit.empty() || unit == "B")
    mult = 1;
  else if (unit == "KB")
    mult = 1000;
  else if (unit == "KiB")
    mult = kKiB;
  else if (unit == "MB")
    mult = 1'000'000;
  else if (unit == "MiB")
    mult = kMiB;
  else
    return false;
  return scaled(num, mult, out) && out < kOff;
}

bool parse_rate(std::string_view t, uint64_t& out) {
  if (t == "inf") {
    out = 0;
    return true;
  }
  auto [num, unit] = split_num(t);
  uint64_t mult;
  if (unit.empty() || unit == "bps")
    mult = 1;
  else if (unit == "K" || unit == "Kbps")
    mult = 1'000;
  else if (unit == "M" || unit == "Mbps")
    mult = 1'000'000;
  else if (unit == "G" || unit == "Gbps")
    mult = 1'000'000'000;
  else if (unit == "T" || unit == "Tbps")
    mult = 1'000'000'000'000;
  else
    return false;
  return scaled(num, mult, out) && out != 0;
}

bool parse_prob(std::string_view t, double& out) {
  const char* b = t.data();
  const char* e = b + t.size();
  double v;
  auto r = std::from_chars(b, e, v, std::chars_format::fixed);
  if (r.ec != std::errc() || r.ptr == b) return false;
  if (r.ptr != e) {
    if (std::string_view(r.ptr, size_t(e - r.ptr)) != "%") return false;
    v /= 100;
  }
  if (!(v >= 0 && v <= 1)) return false;
  out = v;
  return true;
}

class Parser {
 public:
  explicit Parser(std::string_view s) : s_(s) {}

  mrc::Result<Timeline> run() {
    Timeline tl;
    Time prev = 0;
    for (;;) {
      skip_blank();
      if (i_ >= s_.size()) break;
      if (s_[i_] == ';' || s_[i_] == '\n') {
        sep();
        continue;
      }
      FaultEvent ev;
      ev.line = line_;
      ev.col = col();
      // Time
      Tok t = token();
      if (t.text.empty()) return err(t, "expected a time such as '3ms' or '+500us'");
      std::string_view tt = t.text;
      const bool rel = tt[0] == '+';
      if (rel) tt.remove_prefix(1);
      Time at;
      if (!parse_duration(tt, at))
        return err(t, "bad time '" + std::string(t.text) +
                          "' (a number with unit ns, us, ms or s; '+' makes it relative)");
      if (rel) {
        if (at > kNever - prev) return err(t, "time overflows");
        at += prev;
      }
      ev.at = at;
      prev = at;
      skip_blank();
      if (i_ >= s_.size() || s_[i_] != ':') {
        Tok here{{}, line_, col()};
        return err(here, "expected ':' after the time '" + std::string(t.text) + "'");
      }
      i_++;
      // Selector
      Tok w = token();
      if (w.text.empty()) return err(w, "expected a selector (" + std::string(kSelectorList) + ")");
      if (auto st = selector(w, ev.sel); !st) return std::move(st).error();
      // Actions
      size_t n_actions = 0;
      for (;;) {
        skip_blank();
        if (i_ >= s_.size() || s_[i_] == ';' || s_[i_] == '\n') break;
        Tok a = token();
        if (a.text.empty()) return err(a, "unexpected '" + std::string(1, s_[i_]) + "'");
        if (auto st = action(a, ev.action); !st) return std::move(st).error();
        tl.events.push_back(ev);
        n_actions++;
      }
      if (!n_actions) {
        Tok here{{}, line_, col()};
        return err(here, "expected an action after '" + ev.sel.to_string() + "' (" +
                             std::string(kActionList) + ")");
      }
    }
    return tl;
  }

 private:
  struct Tok {
    std::string_view text;
    uint32_t line, col;
  };

  uint32_t col() const { return uint32_t(i_ - line_start_ + 1); }

  mrc::Error err(const Tok& t, const std::string& msg) const {
    return mrc::make_error(
        EINVAL, "timeline:" + std::to_string(t.line) + ":" + std::to_string(t.col) + ": " + msg);
  }

  void skip_blank() {
    while (i_ < s_.size()) {
      const char c = s_[i_];
      if (c == ' ' || c == '\t' || c == '\r') {
        i_++;
      } else if (c == '#') {
        while (i_ < s_.size() && s_[i_] != '\n') i_++;
      } else {
        break;
      }
    }
  }

  void sep() {
    if (s_[i_] == '\n') {
      line_++;
      line_start_ = i_ + 1;
    }
    i_++;
  }

  Tok token() {
    skip_blank();
    Tok t{{}, line_, col()};
    const size_t b = i_;
    while (i_ < s_.size() && !std::strchr(" \t\r\n;:#", s_[i_])) i_++;
    t.text = s_.substr(b, i_ - b);
    return t;
  }

  // "3" or "*"
  bool number(std::string_view t, int32_t& out) {
    if (t == "*") {
      out = LinkSel::kAny;
      return true;
    }
    uint64_t v;
    if (t.empty() || t.find('.') != std::string_view::npos || !scaled(t, 1, v) || v > 1'000'000)
      return false;
    out = int32_t(v);
    return true;
  }

  mrc::Status selector(const Tok& w, LinkSel& sel) {
    using SK = LinkSel::Kind;
    if (w.text == "all") {
      sel = LinkSel::all();
      return {};
    }
    struct Form {
      std::string_view name;
      SK kind;
      bool pair;
      const char* shape;
    };
    static constexpr Form kForms[] = {
        {"plane", SK::kPlane, false, "plane P"},
        {"host", SK::kHost, false, "host H"},
        {"path", SK::kPath, true, "path P/M"},
        {"uplink", SK::kUplink, true, "uplink H/P"},
        {"downlink", SK::kDownlink, true, "downlink H/P"},
        {"port", SK::kPort, true, "port H/P"},
    };
    for (const Form& f : kForms) {
      if (w.text != f.name) continue;
      Tok n = token();
      sel.kind = f.kind;
      std::string_view a = n.text, b;
      if (f.pair) {
        const size_t slash = a.find('/');
        if (slash == std::string_view::npos)
          return err(n, "expected '" + std::string(f.shape) + "' (numbers or '*'), found '" +
                            std::string(n.text) + "'");
        b = a.substr(slash + 1);
        a = a.substr(0, slash);
      }
      if (!number(a, sel.a) || (f.pair && !number(b, sel.b)))
        return err(n, "expected '" + std::string(f.shape) + "' (numbers or '*'), found '" +
                          std::string(n.text) + "'");
      if (!f.pair) sel.b = LinkSel::kAny;
      return {};
    }
    return err(w, "unknown selector '" + std::string(w.text) + "' (expected " +
                      std::string(kSelectorList) + ")");
  }

  mrc::Status action(const Tok& a, FaultAction& act) {
    const ActionName* found = nullptr;
    for (const auto& x : kActions)
      if (x.name == a.text) found = &x;
    if (!found)
      return err(a, "unknown action '" + std::string(a.text) + "' (expected " +
                        std::string(kActionList) + ")");
    act = FaultAction{};
    act.kind = found->kind;
    const std::string name(found->name);
    auto arg = [&](const char* what, auto&& parse) -> mrc::Status {
      Tok v = token();
      if (v.text.empty() || !parse(v.text))
        return err(v, "'" + name + "' needs " + what + ", found '" + std::string(v.text) + "'");
      return {};
    };
    const char* kProb = "a probability in [0, 1] (0.05 or 5%)";
    const char* kTime = "a time with unit ns, us, ms or s";
    switch (act.kind) {
      case Kind::kBlackhole:
      case Kind::kUp:
      case Kind::kDown:
      case Kind::kHeal:
        return {};
      case Kind::kLoss:
      case Kind::kDup:
      case Kind::kCorrupt:
        return arg(kProb, [&](std::string_view t) { return parse_prob(t, act.prob); });
      case Kind::kTrim:
      case Kind::kEcn:
        return arg("a queue depth in bytes (B, KB, KiB, MB, MiB) or 'off'",
                   [&](std::string_view t) { return parse_bytes(t, true, act.value); });
      case Kind::kQueue:
        return arg("a capacity in bytes (B, KB, KiB, MB, MiB)",
                   [&](std::string_view t) { return parse_bytes(t, false, act.value); });
      case Kind::kRate:
        return arg("a rate such as 100Gbps, 25G, 800Mbps or inf",
                   [&](std::string_view t) { return parse_rate(t, act.value); });
      case Kind::kDelay:
      case Kind::kJitter:
        return arg(kTime, [&](std::string_view t) { return parse_duration(t, act.value); });
      case Kind::kReorder:
        MRC_TRY(arg(kProb, [&](std::string_view t) { return parse_prob(t, act.prob); }));
        return arg("a probability and then a delay (time with unit ns, us, ms or s)",
                   [&](std::string_view t) { return parse_duration(t, act.value); });
    }
    return {};
  }

  std::string_view s_;
  size_t i_ = 0;
  uint32_t line_ = 1;
  size_t line_start_ = 0;
};

}  // namespace

// ---------------------------------------------------------------------------

void FaultAction::apply(LinkParams& p, const LinkParams& dflt) const {
  switch (kind) {
    case Kind::kBlackhole:
      p.blackhole = true;
      break;
    case Kind::kUp:
      p.up = true;
      p.blackhole = false;
      break;
    case Kind::kDown:
      p.up = false;
      break;
    case Kind::kLoss:
      p.loss = prob;
      break;
    case Kind::kTrim:
      p.trim_threshold = uint32_t(std::min<uint64_t>(value, kOff));
      break;
    case Kind::kEcn:
      p.ecn_threshold = uint32_t(std::min<uint64_t>(value, kOff));
      break;
    case Kind::kRate:
      p.rate_bps = value;
      break;
    case Kind::kDelay:
      p.latency = value;
      break;
    case Kind::kJitter:
      p.jitter = value;
      break;
    case Kind::kReorder:
      p.reorder = prob;
      p.reorder_delay = value;
      break;
    case Kind::kDup:
      p.dup = prob;
      break;
    case Kind::kCorrupt:
      p.corrupt = prob;
      break;
    case Kind::kQueue:
      p.queue_bytes = uint32_t(std::min<uint64_t>(value, kOff - 1));
      break;
    case Kind::kHeal:
      p = dflt;
      break;
  }
}

std::string FaultAction::to_string() const {
  std::string s(action_name(kind));
  switch (kind) {
    case Kind::kLoss:
    case Kind::kDup:
    case Kind::kCorrupt:
      return s + " " + fmt_prob(prob);
    case Kind::kTrim:
    case Kind::kEcn:
    case Kind::kQueue:
      return s + " " + fmt_bytes(value);
    case Kind::kRate:
      return s + " " + fmt_rate(value);
    case Kind::kDelay:
    case Kind::kJitter:
      return s + " " + format_time(value);
    case Kind::kReorder:
      return s + " " + fmt_prob(prob) + " " + format_time(value);
    default:
      return s;
  }
}

std::string Timeline::to_string() const {
  std::string s;
  for (const auto& e : events)
    s += format_time(e.at) + ": " + e.sel.to_string() + " " + e.action.to_string() + "\n";
  return s;
}

mrc::Result<Timeline> parse_timeline(std::string_view text) { return Parser(text).run(); }

void apply(Network& net, const LinkSel& sel, const FaultAction& action) {
  net.update(sel, [&](LinkParams& p, Tier t) { action.apply(p, net.default_params(t)); });
}

mrc::Status schedule(Network& net, const Timeline& tl, Time offset) {
  for (const auto& e : tl.events) {
    auto st = net.check(e.sel);
    if (!st) {
      mrc::Error er = std::move(st).error();
      if (e.line)
        er.wrap("timeline:" + std::to_string(e.line) + ":" + std::to_string(e.col));
      else
        er.wrap("timeline event at " + format_time(e.at));
      return er;
    }
    if (e.at > kNever - offset)
      return mrc::make_error(EINVAL, "timeline event at " + format_time(e.at) +
                                         " overflows the clock with offset " + format_time(offset));
  }
  for (const auto& e : tl.events) {
    const LinkSel sel = e.sel;
    const FaultAction act = e.action;
    net.at(offset + e.at, [&net, sel, act] { apply(net, sel, act); });
  }
  return {};
}

// ---------------------------------------------------------------------------
// Random timelines

Timeline random_timeline(const NetConfig& shape, const FaultBudget& b, uint64_t seed) {
  Rng rng(mix64(seed ^ 0x74696d656c696e65ull));
  const uint32_t H = std::max<uint32_t>(shape.hosts, 1);
  const uint32_t P = std::max<uint32_t>(shape.planes, 1);
  const uint32_t M = std::max<uint32_t>(shape.paths_per_plane, 1);
  const uint32_t kp = uint32_t(rng.below(P));  // the kept plane and path
  const uint32_t km = uint32_t(rng.below(M));
  const Time window = b.end > b.start ? b.end - b.start : 0;
  const Time max_len = std::max(b.min_len, b.max_len);

  Timeline tl;
  auto episode = [&](LinkSel sel, FaultAction on, FaultAction off) {
    const Time t0 = b.start + (window ? rng.below(window) : 0);
    const Time len = rng.range(b.min_len, max_len);
    const Time t1 = std::min(t0 + len, std::max(b.end, t0));
    tl.events.push_back({t0, sel, on});
    tl.events.push_back({t1, sel, off});
  };
  // Probabilities rounded to 4 decimals so printed timelines stay readable.
  auto prob = [&](double max) {
    double p = std::round(max * (1 - rng.uniform()) * 1e4) / 1e4;
    return std::clamp(p, std::min(max, 1e-4), std::min(max, 1.0));
  };
  // A spine path, excluding the kept one when `avoid` (false if impossible).
  auto pick_path = [&](bool avoid, uint32_t& p, uint32_t& m) {
    const uint64_t n = uint64_t(P) * M;
    if (avoid && b.keep_path) {
      if (n < 2) return false;
      uint64_t k = rng.below(n - 1);
      if (k >= uint64_t(kp) * M + km) k++;
      p = uint32_t(k / M), m = uint32_t(k % M);
    } else {
      const uint64_t k = rng.below(n);
      p = uint32_t(k / M), m = uint32_t(k % M);
    }
    return true;
  };
  auto pick_plane = [&](bool avoid, uint32_t& p) {
    if (avoid && b.keep_path) {
      if (P < 2) return false;
      p = uint32_t(rng.below(P - 1));
      if (p >= kp) p++;
    } else {
      p = uint32_t(rng.below(P));
    }
    return true;
  };
  auto act = [](Kind k, double prob = 0, uint64_t value = 0) {
    return FaultAction{k, prob, value};
  };
  auto path_sel = [](uint32_t p, uint32_t m) { return LinkSel::path(int32_t(p), int32_t(m)); };

  uint32_t p, m;
  for (uint32_t i = 0; i < b.loss_episodes; i++)
    if (b.max_loss > 0 && pick_path(true, p, m))
      episode(path_sel(p, m), act(Kind::kLoss, prob(b.max_loss)), act(Kind::kLoss));
  for (uint32_t i = 0; i < b.path_blackholes; i++)
    if (pick_path(true, p, m)) episode(path_sel(p, m), act(Kind::kBlackhole), act(Kind::kUp));
  for (uint32_t i = 0; i < b.plane_failures; i++)
    if (pick_plane(true, p))
      episode(LinkSel::plane(int32_t(p)), act(rng.below(2) ? Kind::kDown : Kind::kBlackhole),
              act(Kind::kUp));
  for (uint32_t i = 0; i < b.link_failures; i++) {
    const uint32_t h = uint32_t(rng.below(H));
    if (!pick_plane(true, p)) continue;
    const LinkSel sel = rng.below(2) ? LinkSel::uplink(int32_t(h), int32_t(p))
                                     : LinkSel::downlink(int32_t(h), int32_t(p));
    episode(sel, act(rng.below(2) ? Kind::kDown : Kind::kBlackhole), act(Kind::kUp));
  }
  for (uint32_t i = 0; i < b.trim_episodes; i++) {
    const uint64_t q = rng.range(b.trim_min, std::max(b.trim_min, b.trim_max));
    LinkSel sel;
    if (rng.below(2)) {
      pick_path(false, p, m);
      sel = path_sel(p, m);
    } else {
      sel = LinkSel::downlink(int32_t(rng.below(H)), int32_t(rng.below(P)));
    }
    episode(sel, act(Kind::kTrim, 0, q), act(Kind::kTrim, 0, kOff));
  }
  for (uint32_t i = 0; i < b.ecn_episodes; i++) {
    const uint64_t q = rng.range(b.ecn_min, std::max(b.ecn_min, b.ecn_max));
    pick_path(false, p, m);
    episode(path_sel(p, m), act(Kind::kEcn, 0, q), act(Kind::kEcn, 0, kOff));
  }
  for (uint32_t i = 0; i < b.reorder_episodes; i++) {
    if (b.max_reorder <= 0) break;
    pick_path(false, p, m);
    const double pr = prob(b.max_reorder);
    const Time d = rng.range(1, std::max<Time>(1, b.max_reorder_delay));
    episode(path_sel(p, m), act(Kind::kReorder, pr, d), act(Kind::kReorder));
  }
  for (uint32_t i = 0; i < b.dup_episodes; i++) {
    if (b.max_dup <= 0) break;
    pick_path(false, p, m);
    episode(path_sel(p, m), act(Kind::kDup, prob(b.max_dup)), act(Kind::kDup));
  }
  for (uint32_t i = 0; i < b.corrupt_episodes; i++)
    if (b.max_corrupt > 0 && pick_path(true, p, m))
      episode(path_sel(p, m), act(Kind::kCorrupt, prob(b.max_corrupt)), act(Kind::kCorrupt));
  if (b.heal_at_end) tl.events.push_back({b.end, LinkSel::all(), act(Kind::kHeal)});
  std::stable_sort(tl.events.begin(), tl.events.end(),
                   [](const FaultEvent& x, const FaultEvent& y) { return x.at < y.at; });
  return tl;
}

}  // namespace mrc::sim
