// Shared set-up of the controller unit tests: a Controller over a MemStore
// with four configured ports, and short-hands for the mrc_ctl.h calls.
#pragma once

#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "ctl/controller.hpp"
#include "ctl/store.hpp"
#include "ctl/types.hpp"

#define MRC_EXPECT_OK(expr)                  \
  do {                                       \
    auto s_ = (expr);                        \
    EXPECT_TRUE(s_) << s_.error().message(); \
  } while (0)

namespace mrc::testing {

using namespace mrc::ctl;
// Names the ctl model shares with libmrc's vocabulary (mrc/types.hpp): here
// they mean the ctl model's.
using ctl::DeviceAttr, ctl::EvEvent, ctl::EvState, ctl::kEvGood, ctl::kEvAssumedBad, ctl::kEvDenied,
    ctl::kEvUnknown;

inline codec::EvValue bytes(std::initializer_list<uint8_t> b) {
  codec::EvValue v{};
  size_t i = 0;
  for (uint8_t x : b) v[i++] = x;
  return v;
}
inline Ev ev(std::initializer_list<uint8_t> b, uint8_t port) { return Ev{bytes(b), port}; }

class CtlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ctl.set_pid_alive([this](uint32_t pid) { return alive.count(pid) > 0; });
    ctl.open();
    std::vector<PortInfo> ports;
    for (uint8_t p = 1; p <= 4; p++)
      ports.push_back({p, "veth" + std::to_string(p), 100u + p, true, MRC_CTL_XDP_NATIVE});
    ASSERT_TRUE(ctl.configure_ports(ports));
  }

  // EV format profile `id` with `widths`, taken to `state`.
  Status fmt(uint64_t id, std::vector<uint8_t> widths, uint32_t state = kProfileOnline,
             uint32_t mode = kFmtStev) {
    std::vector<codec::EvFmtField> f;
    for (uint8_t w : widths) f.push_back({w});
    EvFmtProfileAttr a;
    a.profile_state = kProfileOffline;
    a.ev_fmt_mode = mode;
    a.ev_fmt_op.op = kFmtOpModifyFields;
    a.ev_fmt_op.fmt_fields = f;
    a.ev_fmt_op.fmt_field_count = int(f.size());
    MRC_TRY(ctl.modify_ev_fmt_profile(id, a, kFmtAttrState | kFmtAttrMode | kFmtAttrOp));
    if (state == kProfileOnline) {
      EvFmtProfileAttr b;
      b.profile_state = kProfileOnline;
      MRC_TRY(ctl.modify_ev_fmt_profile(id, b, kFmtAttrState));
    }
    return ok_status();
  }

  // EV profile INIT -> OFFLINE with everything needed to go ONLINE.
  Status evp_offline(uint64_t id, uint32_t mode, uint64_t fmt_id, uint32_t count,
                     std::vector<codec::EvField> fields, uint32_t min_active = 1,
                     int event_mask = kEvGood | kEvAssumedBad) {
    EvProfileAttr a;
    a.profile_state = kProfileOffline;
    a.ev_mode = mode;
    a.ev_fmt_profile_id = fmt_id;
    a.ev_count = count;
    a.ev_min_active = min_active;
    a.ev_event_mask = event_mask;
    a.ev_fields_op.op = kEvFieldsOpModifyFields;
    a.ev_fields_op.fields = fields;
    a.ev_fields_op.field_count = int(fields.size());
    return ctl.modify_ev_profile(id, a,
                                 kEvpAttrState | kEvpAttrMode | kEvpAttrFmtId | kEvpAttrCount |
                                     kEvpAttrMinActive | kEvpAttrEventMask | kEvpAttrEvFieldsOp);
  }

  Status set_state(uint64_t id, uint32_t state) {
    EvProfileAttr a;
    a.profile_state = state;
    return ctl.modify_ev_profile(id, a, kEvpAttrState);
  }

  Status ev_op(uint64_t id, uint32_t op, std::vector<EvOpEntry>& entries) {
    EvProfileAttr a;
    a.ev_op.op = op;
    a.ev_op.entries = entries;
    a.ev_op.entry_count = int(entries.size());
    return ctl.modify_ev_profile(id, a, kEvpAttrEvOp);
  }

  // Replaces UNPOPULATED entries with `evs` (one entry each).
  Status populate(uint64_t id, const std::vector<Ev>& evs, uint32_t state = kEvGood) {
    std::vector<EvOpEntry> e;
    for (const Ev& v : evs) e.push_back({Ev::unpopulated_ev(), v, state, 0});
    return ev_op(id, kEvOpReplaceEv, e);
  }

  std::vector<EvOpEntry> array(uint64_t id) {
    EvProfileAttr q;
    MRC_EXPECT_OK(ctl.query_ev_profile(id, q, kEvpAttrCount));
    std::vector<EvOpEntry> out(q.ev_count + 1);
    EvProfileAttr a;
    a.ev_op.op = kEvOpQueryEvArray;
    a.ev_op.entries = out;
    a.ev_op.entry_count = int(out.size());
    Status s = ctl.query_ev_profile(id, a, kEvpAttrEvOp);
    EXPECT_TRUE(s) << s.error().message();
    out.resize(size_t(a.ev_op.entry_count));
    return out;
  }

  uint32_t state_of(uint64_t id, const Ev& v) {
    std::vector<EvOpEntry> e{{v, {}, 0, 0}};
    EvProfileAttr a;
    a.ev_op.op = kEvOpQueryEvState;
    a.ev_op.entries = e;
    a.ev_op.entry_count = 1;
    Status s = ctl.query_ev_profile(id, a, kEvpAttrEvOp);
    if (!s) return 0;
    return e[0].state;
  }

  // A QP report from process `pid` using EV profile `evp` / CC profile `cc`.
  void qp_user(uint32_t pid, uint32_t qpn, uint64_t evp, uint64_t cc = 0) {
    alive.insert(pid);
    mrc_ctl_qp_report r{};
    r.ev_profile_id = evp;
    r.cc_profile_id = cc;
    r.state = uint32_t(core::QpState::kRts);
    ASSERT_TRUE(store.put_qp({pid, 0, qpn, 0}, r));
  }

  MemStore store;
  Controller ctl{store};
  std::set<uint32_t> alive;
};

}  // namespace mrc::testing
