// Controller conformance behaviours 9-19 of mrc-protocol.md section 8
// (20 is in server_test.cc, 21 in ep_test.cc, 22 in client_test.cc), run
// through the controller model over the in-memory store.
#include <gtest/gtest.h>

#include "ctl/srv6.hpp"
#include "support/ctl_fixture.hpp"

namespace mrc::testing {
namespace {

uint32_t wire_of(Controller& c, uint64_t id, size_t i) { return c.ev_entries(id)[i].wire; }

// --- 9. EV expansion test vectors through the controller path ---------------

TEST_F(CtlTest, Conf09_GeneratedStevVectorExpandsBitExact) {
  // fmt 16,16; fields {16, init 0x0100, mask 0x000f}, {16, init 0x0200, mask 0x000f};
  // compact a4 -> 010a 0204. Generated index 0xa*16+4 = 164 is compact a4.
  ASSERT_TRUE(fmt(13, {16, 16}));
  ASSERT_TRUE(evp_offline(1, kEvModeGen, 13, 256,
                          {{16, 0x0100, 0, 15, 0x000f}, {16, 0x0200, 0, 15, 0x000f}}, 64));
  ASSERT_TRUE(set_state(1, kProfileOnline));
  auto arr = array(1);
  ASSERT_EQ(arr.size(), 256u);
  EXPECT_EQ(arr[164].ev.val, bytes({0xa4}));
  EXPECT_EQ(wire_of(ctl, 1, 164), 0x010a0204u);
  // Ports are spread over the configured ports.
  EXPECT_EQ(arr[0].ev.port, 1);
  EXPECT_EQ(arr[1].ev.port, 2);
  EXPECT_EQ(arr[4].ev.port, 1);
}

TEST_F(CtlTest, Conf09_ExplicitStevVectorsExpandBitExact) {
  ASSERT_TRUE(fmt(13, {16, 16}));
  // "weird mask": {16, init 0x1000, mask 0x0f0f}, {16, init 0x2000, mask 0x0f0f}; 33 12 -> 1303
  // 2102
  ASSERT_TRUE(evp_offline(2, kEvModeExp, 13, 1,
                          {{16, 0x1000, 0, 255, 0x0f0f}, {16, 0x2000, 0, 255, 0x0f0f}}));
  ASSERT_TRUE(populate(2, {ev({0x33, 0x12}, 1)}));
  EXPECT_EQ(wire_of(ctl, 2, 0), 0x13032102u);
  // explicit 2x{16, mask 0xffff}: f3 b0 42 56 -> f3b0 4256
  ASSERT_TRUE(
      evp_offline(3, kEvModeExp, 13, 1, {{16, 0, 0, 0xffff, 0xffff}, {16, 0, 0, 0xffff, 0xffff}}));
  ASSERT_TRUE(populate(3, {ev({0xf3, 0xb0, 0x42, 0x56}, 2)}));
  EXPECT_EQ(wire_of(ctl, 3, 0), 0xf3b04256u);
  // STEV gen + fixed via EXPLICIT: a4 -> 010a 0204
  ASSERT_TRUE(evp_offline(4, kEvModeExp, 13, 1,
                          {{16, 0x0100, 0, 15, 0x000f}, {16, 0x0200, 0, 15, 0x000f}}));
  ASSERT_TRUE(populate(4, {ev({0xa4}, 3)}));
  EXPECT_EQ(wire_of(ctl, 4, 0), 0x010a0204u);
  ASSERT_TRUE(set_state(2, kProfileOnline));
  auto a = array(2);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].ev, ev({0x33, 0x12}, 1));
  EXPECT_EQ(a[0].state, kEvGood);
}

TEST_F(CtlTest, Conf09_Srv6VectorsExpandToUsidContainers) {
  // SRv6 formats are up to one uSID container (128 bits) wide; STEV stays
  // within ev_max_width 32; a wider SRv6 format needs an SRH: ENOTSUP.
  ASSERT_TRUE(fmt(14, {32, 16, 16, 16, 16}, kProfileOnline, kFmtSrv6));
  EXPECT_EQ(fmt(15, {32, 16, 16, 16, 16}, kProfileOffline, kFmtStev).error().code, E2BIG);
  EXPECT_EQ(fmt(16, {32, 32, 32, 32, 16}, kProfileOffline, kFmtSrv6).error().code, ENOTSUP);
  DeviceAttr d = ctl.query_device();
  EXPECT_EQ(d.ev.ev_fmt_mode_mask, uint32_t(kFmtStev | kFmtSrv6 | kFmtUdp));
  EXPECT_EQ(d.ev.ev_max_width, 32u);
  // The vectors: "SRv6 gen", "SRv6 gen + fixed", "SRv6 explicit subset".
  struct V {
    std::vector<codec::EvField> f;
    Ev ev;
    const char* want;
  } vs[] = {
      {{{32, 0x42424242, 0, 0, 0},
        {4, 0, 0, 15, 0xf},
        {4, 0, 0, 15, 0xf},
        {4, 0, 0, 15, 0xf},
        {4, 0, 0, 15, 0xf}},
       ev({0x78, 0xba}, 1),
       "4242:4242:7:8:b:a::"},
      {{{32, 0x13131313, 0, 0, 0},
        {16, 0x100, 0, 15, 0xf},
        {16, 0x200, 0, 15, 0xf},
        {16, 0x300, 0, 15, 0xf},
        {16, 0x400, 0, 15, 0xf}},
       ev({0x9b, 0x79}, 2),
       "1313:1313:109:20b:307:409::"},
      {{{32, 0xdeaddead, 0, 0, 0}, {16, 0, 0, 0xffff, 0xffff}, {16, 0, 0, 0xffff, 0xffff}},
       ev({0xe2, 0x98, 0xf1, 0x15}, 3),
       "dead:dead:e298:f115::"},
  };
  uint64_t id = 20;
  for (const V& v : vs) {
    ASSERT_TRUE(evp_offline(id, kEvModeExp, 14, 1, v.f));
    ASSERT_TRUE(populate(id, {v.ev}));
    const mrc_ctl_evp* p = ctl.ev_record(id);
    ASSERT_NE(p, nullptr);
    const mrc_ctl_ev_entry e = ctl.ev_entries(id)[0];
    codec::Srv6Sid sid{};
    ASSERT_TRUE(srv6_sid_of(*ctl.fmt_record(14), *p, e, sid));
    EXPECT_EQ(codec::srv6_to_string(sid), v.want);
    EXPECT_EQ(e.wire, codec::srv6_entropy(sid));  // the carried entropy is the container's
    id++;
  }
}

TEST_F(CtlTest, Conf09_ExplicitEvWithBitsBeyondTheFieldsIsRejected) {
  ASSERT_TRUE(fmt(13, {16, 16}));
  ASSERT_TRUE(evp_offline(4, kEvModeExp, 13, 1,
                          {{16, 0x0100, 0, 15, 0x000f}, {16, 0x0200, 0, 15, 0x000f}}));
  // 8 compact bits consumed: a second byte is left over.
  Status s = populate(4, {ev({0xa4, 0x01}, 1)});
  EXPECT_EQ(s.error().code, EINVAL) << s.error().message();
}

// --- 10. the five field rules -----------------------------------------------

TEST_F(CtlTest, Conf10_FieldRulesAreEnforced) {
  ASSERT_TRUE(fmt(13, {16, 16}));
  struct Case {
    const char* rule;
    std::vector<codec::EvField> fields;
    int err;
  } cases[] = {
      {"field_count > fmt_field_count",
       {{8, 0, 0, 1, 1}, {8, 0, 0, 1, 1}, {8, 0, 0, 1, 1}},
       EINVAL},
      {"sum of widths > sum of format widths", {{16, 0, 0, 1, 1}, {17, 0, 0, 1, 1}}, EINVAL},
      {"init_val wider than the field", {{8, 0x100, 0, 1, 1}}, EINVAL},
      {"mask bits outside the field", {{8, 0, 0, 1, 0x100}}, EINVAL},
      {"max_val wider than popcount(mask)", {{8, 0, 0, 4, 0x3}}, EINVAL},
      {"min_val > max_val", {{8, 0, 3, 2, 0x3}}, EINVAL},
  };
  uint64_t id = 100;
  for (const Case& c : cases) {
    Status s = evp_offline(id++, kEvModeGen, 13, 4, c.fields);
    ASSERT_FALSE(s.ok()) << c.rule;
    EXPECT_EQ(s.error().code, c.err) << c.rule << ": " << s.error().message();
  }
  // Format: total width above ev_max_width, too many fields, 0-bit field.
  EXPECT_EQ(fmt(20, {16, 16, 8}).error().code, E2BIG);
  EXPECT_EQ(fmt(21, std::vector<uint8_t>(17, 1)).error().code, E2BIG);
  EXPECT_EQ(fmt(22, {16, 0}).error().code, EINVAL);
  EXPECT_EQ(fmt(23, {12, 8}, kProfileOnline, kFmtUdp).error().code, E2BIG);  // UDP carries 16 bits
  ASSERT_TRUE(fmt(24, {8, 8}, kProfileOnline, kFmtUdp));
  // Too many EV fields.
  std::vector<codec::EvField> many(17, codec::EvField{1, 0, 0, 1, 1});
  EXPECT_EQ(evp_offline(200, kEvModeGen, 13, 4, many).error().code, E2BIG);
  // A valid profile after all the failures; none of them left a profile behind.
  ASSERT_TRUE(evp_offline(201, kEvModeGen, 13, 4, {{8, 0, 0, 3, 0x3}}));
  EvProfileAttr q;
  EXPECT_EQ(ctl.query_ev_profile(100, q, kEvpAttrState).error().code, EINVAL);
}

// --- 11. EXPLICIT cannot go ONLINE while UNPOPULATED -------------------------

TEST_F(CtlTest, Conf11_ExplicitCannotGoOnlineWhileUnpopulated) {
  ASSERT_TRUE(fmt(13, {16, 16}));
  ASSERT_TRUE(evp_offline(1, kEvModeExp, 13, 4,
                          {{16, 0, 0, 0xffff, 0xffff}, {16, 0, 0, 0xffff, 0xffff}}, 2));
  for (const auto& e : array(1)) {
    EXPECT_TRUE(e.ev.unpopulated());
    EXPECT_EQ(e.state, kEvUnknown);
  }
  Status s = set_state(1, kProfileOnline);
  EXPECT_EQ(s.error().code, EINVAL);
  EXPECT_NE(s.error().message().find("4 of 4"), std::string::npos) << s.error().message();
  ASSERT_TRUE(populate(1, {ev({0, 1, 0, 1}, 1), ev({0, 2, 0, 2}, 2), ev({0, 3, 0, 3}, 3)}));
  s = set_state(1, kProfileOnline);
  EXPECT_EQ(s.error().code, EINVAL);
  EXPECT_NE(s.error().message().find("1 of 4"), std::string::npos) << s.error().message();
  ASSERT_TRUE(populate(1, {ev({0, 4, 0, 4}, 4)}));
  ASSERT_TRUE(set_state(1, kProfileOnline));
  EvProfileAttr q;
  ASSERT_TRUE(ctl.query_ev_profile(1, q, kEvpAttrState | kEvpAttrCurState));
  EXPECT_EQ(q.cur_profile_state, kProfileOnline);
  EXPECT_EQ(q.profile_state, kProfileOnline);
}

// --- 12. state transitions ----------------------------------------------------

TEST_F(CtlTest, Conf12_OnlyTheProfileChainIsAllowed) {
  ASSERT_TRUE(fmt(13, {16, 16}));
  // INIT -> ONLINE skips OFFLINE.
  EvProfileAttr a;
  a.profile_state = kProfileOnline;
  a.ev_mode = kEvModeAuto;
  a.ev_min_active = 0;
  a.ev_event_mask = kEvGood;
  EXPECT_EQ(ctl.modify_ev_profile(
                   5, a, kEvpAttrState | kEvpAttrMode | kEvpAttrMinActive | kEvpAttrEventMask)
                .error()
                .code,
            EINVAL);
  ASSERT_TRUE(evp_offline(5, kEvModeGen, 13, 8, {{8, 0, 0, 7, 0x7}}));
  EXPECT_EQ(set_state(5, 7).error().code, EINVAL);  // not a state
  ASSERT_TRUE(set_state(5, kProfileOnline));
  EXPECT_EQ(set_state(5, kProfileInit).error().code, EINVAL);  // ONLINE -> INIT
  ASSERT_TRUE(set_state(5, kProfileOnline));                   // no change
  ASSERT_TRUE(set_state(5, kProfileOffline));
  ASSERT_TRUE(set_state(5, kProfileInit));
  EXPECT_EQ(set_state(5, kProfileOnline).error().code, EINVAL);  // INIT -> ONLINE
  EXPECT_TRUE(ctl.ev_entries(5).empty());
  EvProfileAttr q;
  ASSERT_TRUE(ctl.query_ev_profile(5, q, kEvpAttrCurState | kEvpAttrMode));
  EXPECT_EQ(q.cur_profile_state, kProfileInit);
  EXPECT_EQ(q.ev_mode, 0u);
  EXPECT_EQ(ctl.query_device().ev.ev_free_count, uint32_t(MRC_CTL_EV_POOL));

  // Format profiles: ONLINE -> INIT refused; OFFLINE needs MODE; ONLINE needs fields.
  EvFmtProfileAttr f;
  f.profile_state = kProfileInit;
  EXPECT_EQ(ctl.modify_ev_fmt_profile(13, f, kFmtAttrState).error().code, EINVAL);
  f.profile_state = kProfileOffline;
  EXPECT_EQ(ctl.modify_ev_fmt_profile(30, f, kFmtAttrState).error().code, EINVAL);
  f.ev_fmt_mode = kFmtStev;
  ASSERT_TRUE(ctl.modify_ev_fmt_profile(30, f, kFmtAttrState | kFmtAttrMode));
  f.profile_state = kProfileOnline;
  EXPECT_EQ(ctl.modify_ev_fmt_profile(30, f, kFmtAttrState).error().code, EINVAL);

  // CC profiles: OFFLINE needs ALGORITHM, ONLINE needs CONFIG.
  CcProfileAttr c;
  c.profile_state = kProfileOffline;
  EXPECT_EQ(ctl.modify_cc_profile(7, c, kCcAttrState).error().code, EINVAL);
  c.algorithm = "reno";
  EXPECT_EQ(ctl.modify_cc_profile(7, c, kCcAttrState | kCcAttrAlgorithm).error().code, EINVAL);
  c.algorithm = kAlgNscc;
  ASSERT_TRUE(ctl.modify_cc_profile(7, c, kCcAttrState | kCcAttrAlgorithm));
  c.profile_state = kProfileOnline;
  EXPECT_EQ(ctl.modify_cc_profile(7, c, kCcAttrState).error().code, EINVAL);
  c.cc_config = NsccCfg{};
  c.cc_config->target_delay = 8000;
  ASSERT_TRUE(ctl.modify_cc_profile(7, c, kCcAttrState | kCcAttrConfig));
  c.profile_state = kProfileInit;
  EXPECT_EQ(ctl.modify_cc_profile(7, c, kCcAttrState).error().code, EINVAL);
  CcProfileAttr cq;
  ASSERT_TRUE(ctl.query_cc_profile(7, cq, kCcAttrCurState | kCcAttrAlgorithm | kCcAttrConfig));
  EXPECT_EQ(cq.cur_profile_state, kProfileOnline);
  EXPECT_EQ(cq.algorithm, std::optional<std::string>(kAlgNscc));
  ASSERT_TRUE(cq.cc_config);
  EXPECT_EQ(cq.cc_config->target_delay, 8000u);
  // ONLINE: CONFIG is not modifiable (no CC_PROFILE_MODIFY_ONLINE).
  EXPECT_EQ(ctl.modify_cc_profile(7, c, kCcAttrConfig).error().code, EINVAL);
  EXPECT_FALSE(ctl.query_device().opt_attr & kCapCcProfileModifyOnline);
}

TEST_F(CtlTest, Conf12_OnlineProfileRefusesOfflineOnlyAttributes) {
  ASSERT_TRUE(fmt(13, {16, 16}));
  ASSERT_TRUE(evp_offline(5, kEvModeGen, 13, 8, {{8, 0, 0, 7, 0x7}}));
  ASSERT_TRUE(set_state(5, kProfileOnline));
  EvProfileAttr a;
  a.ev_count = 16;
  EXPECT_EQ(ctl.modify_ev_profile(5, a, kEvpAttrCount).error().code, EINVAL);
  a.ev_event_mask = kEvGood;
  EXPECT_EQ(ctl.modify_ev_profile(5, a, kEvpAttrEventMask).error().code, EINVAL);
  EXPECT_EQ(ctl.modify_ev_profile(5, a, kEvpAttrCurState).error().code, EINVAL);
  // CUR_STATE of a query is fine; an unknown mask bit is not.
  EXPECT_EQ(ctl.modify_ev_profile(5, a, 1u << 12).error().code, EINVAL);
}

// --- 13. EV_OP + EV_FIELDS_OP -------------------------------------------------

TEST_F(CtlTest, Conf13_EvOpWithFieldsOpIsEinvalAndNeitherIsANoop) {
  ASSERT_TRUE(fmt(13, {16, 16}));
  ASSERT_TRUE(evp_offline(5, kEvModeGen, 13, 8, {{8, 0, 0, 7, 0x7}}));
  const uint64_t gen = read_gen(store.dev());
  std::vector<EvOpEntry> e(8);
  std::vector<codec::EvField> f(4);
  EvProfileAttr a;
  a.ev_op.op = kEvOpQueryEvArray;
  a.ev_op.entries = e;
  a.ev_op.entry_count = 8;
  a.ev_fields_op.op = kEvFieldsOpQueryFields;
  a.ev_fields_op.fields = f;
  a.ev_fields_op.field_count = 4;
  EXPECT_EQ(ctl.modify_ev_profile(5, a, kEvpAttrEvOp | kEvpAttrEvFieldsOp).error().code, EINVAL);
  EXPECT_EQ(ctl.query_ev_profile(5, a, kEvpAttrEvOp | kEvpAttrEvFieldsOp).error().code, EINVAL);
  EXPECT_TRUE(ctl.modify_ev_profile(5, a, 0));
  EXPECT_TRUE(ctl.query_ev_profile(5, a, 0));
  EXPECT_EQ(read_gen(store.dev()), gen);  // nothing was committed
  // Each alone works.
  EXPECT_TRUE(ctl.query_ev_profile(5, a, kEvpAttrEvOp));
  EXPECT_EQ(a.ev_op.entry_count, 8);
  EXPECT_TRUE(ctl.query_ev_profile(5, a, kEvpAttrEvFieldsOp));
  EXPECT_EQ(a.ev_fields_op.field_count, 1);
  EXPECT_EQ(f[0].mask, 0x7u);
}

// --- 14. batches stop at the first failing entry ---------------------------------

TEST_F(CtlTest, Conf14_BatchStopsAtFirstFailureAndKeepsEarlierEntries) {
  ASSERT_TRUE(fmt(13, {16, 16}));
  ASSERT_TRUE(
      evp_offline(1, kEvModeExp, 13, 4, {{16, 0, 0, 0xffff, 0xffff}, {16, 0, 0, 0xffff, 0xffff}}));
  std::vector<EvOpEntry> e = {
      {Ev::unpopulated_ev(), ev({0, 0, 0, 1}, 1), kEvGood, 0},
      {Ev::unpopulated_ev(), ev({0, 0, 0, 2}, 2), kEvGood, 0},
      {Ev::unpopulated_ev(), ev({0, 0, 0, 3}, 9), kEvGood, 0},  // port 9 is not configured
      {Ev::unpopulated_ev(), ev({0, 0, 0, 4}, 4), kEvGood, 0},
  };
  Status s = ev_op(1, kEvOpReplaceEv, e);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, EINVAL);
  EXPECT_NE(s.error().message().find("entry 2"), std::string::npos) << s.error().message();
  auto arr = array(1);
  EXPECT_EQ(arr[0].ev, ev({0, 0, 0, 1}, 1));
  EXPECT_EQ(arr[1].ev, ev({0, 0, 0, 2}, 2));
  EXPECT_TRUE(arr[2].ev.unpopulated());
  EXPECT_TRUE(arr[3].ev.unpopulated());

  // MODIFY_EV_STATE: the second entry names an EV that is not there (ENOENT).
  std::vector<EvOpEntry> m = {{ev({0, 0, 0, 1}, 1), {}, kEvDenied, 0},
                              {ev({0, 0, 0, 9}, 1), {}, kEvDenied, 0},
                              {ev({0, 0, 0, 2}, 2), {}, kEvDenied, 0}};
  s = ev_op(1, kEvOpModifyEvState, m);
  EXPECT_EQ(s.error().code, ENOENT);
  EXPECT_EQ(state_of(1, ev({0, 0, 0, 1}, 1)), kEvDenied);
  EXPECT_EQ(state_of(1, ev({0, 0, 0, 2}, 2)), kEvGood);
  EXPECT_EQ(ctl.ev_record(1)->n_denied, 1u);
  // A state transition in the same call does not happen after a failed entry.
  ASSERT_TRUE(populate(1, {ev({0, 0, 0, 3}, 3)}));
  std::vector<EvOpEntry> last = {{Ev::unpopulated_ev(), ev({0, 0, 0, 4}, 99), kEvGood, 0}};
  EvProfileAttr a;
  a.profile_state = kProfileOnline;
  a.ev_op.op = kEvOpReplaceEv;
  a.ev_op.entries = last;
  a.ev_op.entry_count = 1;
  EXPECT_EQ(ctl.modify_ev_profile(1, a, kEvpAttrState | kEvpAttrEvOp).error().code, EINVAL);
  EXPECT_EQ(ctl.ev_record(1)->cur_state, uint32_t(kProfileOffline));
  last[0].ev_new.port = 4;
  ASSERT_TRUE(ctl.modify_ev_profile(1, a, kEvpAttrState | kEvpAttrEvOp));
  EXPECT_EQ(ctl.ev_record(1)->cur_state, uint32_t(kProfileOnline));
}

// --- 15. REPLACE_EV and ALL_COPIES ------------------------------------------------

TEST_F(CtlTest, Conf15_ReplaceOneOccurrenceOrAllCopies) {
  ASSERT_TRUE(fmt(13, {16, 16}));
  ASSERT_TRUE(
      evp_offline(1, kEvModeExp, 13, 6, {{16, 0, 0, 0xffff, 0xffff}, {16, 0, 0, 0xffff, 0xffff}}));
  const Ev dup = ev({0xaa, 0xaa, 0, 1}, 1);
  ASSERT_TRUE(populate(1, {dup, dup, dup, ev({0, 0, 0, 2}, 2), ev({0, 0, 0, 3}, 3), dup}));
  auto count = [&](const Ev& v) {
    int n = 0;
    for (const auto& e : array(1)) n += e.ev == v;
    return n;
  };
  ASSERT_EQ(count(dup), 4);
  const Ev one = ev({0xbb, 0xbb, 0, 1}, 2);
  std::vector<EvOpEntry> r = {{dup, one, kEvGood, 0}};
  ASSERT_TRUE(ev_op(1, kEvOpReplaceEv, r));
  EXPECT_EQ(count(dup), 3);
  EXPECT_EQ(count(one), 1);
  const Ev all = ev({0xcc, 0xcc, 0, 1}, 3);
  r = {{dup, all, kEvDenied, kEvOpFAllCopies}};
  ASSERT_TRUE(ev_op(1, kEvOpReplaceEv, r));
  EXPECT_EQ(count(dup), 0);
  EXPECT_EQ(count(all), 3);
  EXPECT_EQ(state_of(1, all), kEvDenied);
  // Replacing an EV that is gone is ENOENT; unknown flags are EINVAL.
  r = {{dup, one, kEvGood, 0}};
  EXPECT_EQ(ev_op(1, kEvOpReplaceEv, r).error().code, ENOENT);
  r = {{all, one, kEvGood, 0x4}};
  EXPECT_EQ(ev_op(1, kEvOpReplaceEv, r).error().code, EINVAL);
  r = {{all, one, kEvAssumedBad, 0}};
  EXPECT_EQ(ev_op(1, kEvOpReplaceEv, r).error().code, EINVAL);
}

// --- 16. EBUSY ---------------------------------------------------------------------

TEST_F(CtlTest, Conf16_FormatOfAnOnlineProfileIsBusy) {
  ASSERT_TRUE(fmt(13, {16, 16}));
  ASSERT_TRUE(evp_offline(5, kEvModeGen, 13, 8, {{8, 0, 0, 7, 0x7}}));
  // OFFLINE EV profile: the format may still change.
  std::vector<codec::EvFmtField> w = {{16}, {16}};
  EvFmtProfileAttr f;
  f.profile_state = kProfileOffline;
  ASSERT_TRUE(ctl.modify_ev_fmt_profile(13, f, kFmtAttrState));
  f.profile_state = kProfileOnline;
  ASSERT_TRUE(ctl.modify_ev_fmt_profile(13, f, kFmtAttrState));
  ASSERT_TRUE(set_state(5, kProfileOnline));
  f.profile_state = kProfileOffline;
  EXPECT_EQ(ctl.modify_ev_fmt_profile(13, f, kFmtAttrState).error().code, EBUSY);
  f.ev_fmt_mode = kFmtUdp;
  EXPECT_EQ(ctl.modify_ev_fmt_profile(13, f, kFmtAttrMode).error().code, EBUSY);
  f.ev_fmt_op.op = kFmtOpModifyFields;
  f.ev_fmt_op.fmt_fields = w;
  f.ev_fmt_op.fmt_field_count = 2;
  EXPECT_EQ(ctl.modify_ev_fmt_profile(13, f, kFmtAttrOp).error().code, EBUSY);
  // Queries are not modifications.
  f.ev_fmt_op.op = kFmtOpQueryFields;
  EXPECT_TRUE(ctl.modify_ev_fmt_profile(13, f, kFmtAttrOp));
  ASSERT_TRUE(set_state(5, kProfileOffline));
  f.profile_state = kProfileOffline;
  EXPECT_TRUE(ctl.modify_ev_fmt_profile(13, f, kFmtAttrState));
  // The EV profile cannot go ONLINE while its format is OFFLINE.
  EXPECT_EQ(set_state(5, kProfileOnline).error().code, EINVAL);
}

TEST_F(CtlTest, Conf16_ProfilesUsedByActiveQpsAreBusy) {
  ASSERT_TRUE(fmt(13, {16, 16}));
  ASSERT_TRUE(evp_offline(5, kEvModeGen, 13, 8, {{8, 0, 0, 7, 0x7}}));
  ASSERT_TRUE(set_state(5, kProfileOnline));
  CcProfileAttr c;
  c.profile_state = kProfileOffline;
  c.algorithm = kAlgNscc;
  c.cc_config = NsccCfg{};
  ASSERT_TRUE(ctl.modify_cc_profile(9, c, kCcAttrState | kCcAttrAlgorithm | kCcAttrConfig));
  c.profile_state = kProfileOnline;
  ASSERT_TRUE(ctl.modify_cc_profile(9, c, kCcAttrState));

  qp_user(4242, 17, 5, 9);
  EXPECT_EQ(ctl.ev_profile_users(5), 1u);
  EXPECT_EQ(set_state(5, kProfileOffline).error().code, EBUSY);
  EvProfileAttr a;
  a.ev_event_mask = kEvGood;
  EXPECT_EQ(ctl.modify_ev_profile(5, a, kEvpAttrEventMask).error().code, EBUSY);
  c.profile_state = kProfileOffline;
  EXPECT_EQ(ctl.modify_cc_profile(9, c, kCcAttrState).error().code, EBUSY);
  EXPECT_EQ(ctl.modify_cc_profile(9, c, kCcAttrConfig).error().code, EBUSY);
  // Controller EV state changes are what ONLINE in-use profiles are for.
  auto arr = array(5);
  std::vector<EvOpEntry> m = {{arr[0].ev, {}, kEvDenied, 0}};
  EXPECT_TRUE(ev_op(5, kEvOpModifyEvState, m));

  // A QP in RESET does not count; a dead process does not count.
  alive.erase(4242);
  EXPECT_EQ(ctl.ev_profile_users(5), 0u);
  EXPECT_TRUE(set_state(5, kProfileOffline));
  EXPECT_TRUE(ctl.modify_cc_profile(9, c, kCcAttrState));
  EXPECT_EQ(ctl.reap_dead(), 1u);
  EXPECT_TRUE(store.list_qps()->empty());
}

// --- 17. E2BIG with the required count ---------------------------------------------

TEST_F(CtlTest, Conf17_SmallQueryArraysReportTheRequiredCount) {
  ASSERT_TRUE(fmt(13, {8, 8, 8}));
  ASSERT_TRUE(evp_offline(5, kEvModeGen, 13, 40,
                          {{8, 0, 0, 3, 0x3}, {8, 0, 0, 3, 0x3}, {8, 0, 0, 3, 0x3}}));
  std::vector<EvOpEntry> e(10);
  EvProfileAttr a;
  a.ev_op.op = kEvOpQueryEvArray;
  a.ev_op.entries = e;
  a.ev_op.entry_count = 10;
  EXPECT_EQ(ctl.query_ev_profile(5, a, kEvpAttrEvOp).error().code, E2BIG);
  EXPECT_EQ(a.ev_op.entry_count, 40);
  std::vector<codec::EvField> f(2);
  a.ev_fields_op.op = kEvFieldsOpQueryFields;
  a.ev_fields_op.fields = f;
  a.ev_fields_op.field_count = 2;
  EXPECT_EQ(ctl.query_ev_profile(5, a, kEvpAttrEvFieldsOp).error().code, E2BIG);
  EXPECT_EQ(a.ev_fields_op.field_count, 3);
  std::vector<codec::EvFmtField> ff(1);
  EvFmtProfileAttr fa;
  fa.ev_fmt_op.op = kFmtOpQueryFields;
  fa.ev_fmt_op.fmt_fields = ff;
  fa.ev_fmt_op.fmt_field_count = 1;
  EXPECT_EQ(ctl.query_ev_fmt_profile(13, fa, kFmtAttrOp).error().code, E2BIG);
  EXPECT_EQ(fa.ev_fmt_op.fmt_field_count, 3);
  // With the reported sizes the queries succeed.
  e.resize(40);
  a.ev_op.entries = e;
  a.ev_op.entry_count = 40;
  ASSERT_TRUE(ctl.query_ev_profile(5, a, kEvpAttrEvOp));
  EXPECT_EQ(e[39].ev.val, bytes({0x9c}));  // index 39 = 2,1,3 -> bits 10 01 11, left-aligned
  ff.resize(3);
  fa.ev_fmt_op.fmt_fields = ff;
  fa.ev_fmt_op.fmt_field_count = 3;
  ASSERT_TRUE(ctl.query_ev_fmt_profile(13, fa, kFmtAttrOp));
  EXPECT_EQ(ff[2].width, 8);
  // A batch above ev_op_max_entries is E2BIG too; a count beyond the array EINVAL.
  std::vector<EvOpEntry> big(ctl.limits().ev_op_max_entries + 1);
  EXPECT_EQ(ev_op(5, kEvOpModifyEvState, big).error().code, E2BIG);
  a.ev_op.entry_count = 41;
  EXPECT_EQ(ctl.query_ev_profile(5, a, kEvpAttrEvOp).error().code, EINVAL);
}

// --- 18. event mask, exactly one event per transition, drop counts ------------------

class CtlEvents : public CtlTest {
 protected:
  void SetUp() override {
    CtlTest::SetUp();
    ASSERT_TRUE(fmt(13, {16, 16}));
    ASSERT_TRUE(
        evp_offline(5, kEvModeGen, 13, 8, {{8, 0x10, 0, 7, 0x7}}, 1, kEvGood | kEvAssumedBad));
    ASSERT_TRUE(set_state(5, kProfileOnline));
    arr = array(5);
    alive = {100, 200};
  }
  // A data-path report: QP (pid, qpn) moved EV index i from -> to.
  void report(uint32_t pid, uint32_t qpn, size_t i, uint8_t from, uint8_t to) {
    mrc_ctl_ev_report r{};
    r.profile_id = 5;
    r.pid = pid;
    r.qpn = qpn;
    r.wire = ctl.ev_entries(5)[i].wire;
    r.port = arr[i].ev.port;
    r.from = from;
    r.to = to;
    r.reason = uint8_t(core::EvEventReason::kTimeout);
    ASSERT_TRUE(store.record_push(r));
  }
  std::vector<EvEvent> drain(EvEventCq& cq) {
    std::vector<EvEvent> out(64);
    out.resize(cq.poll(out));
    return out;
  }
  std::vector<EvOpEntry> arr;
};

TEST_F(CtlEvents, Conf18_OnlyGoodAndAssumedBadCanBeMonitored) {
  EvProfileAttr a;
  a.ev_event_mask = kEvDenied;
  ASSERT_TRUE(set_state(5, kProfileOffline));
  EXPECT_EQ(ctl.modify_ev_profile(5, a, kEvpAttrEventMask).error().code, EINVAL);
  a.ev_event_mask = int(kEvUnknown);
  EXPECT_EQ(ctl.modify_ev_profile(5, a, kEvpAttrEventMask).error().code, EINVAL);
  a.ev_event_mask = kEvAssumedBad;
  EXPECT_TRUE(ctl.modify_ev_profile(5, a, kEvpAttrEventMask));
  EXPECT_TRUE(ctl.query_device().opt_attr & kCapEvEvent);
  EXPECT_TRUE(ctl.query_device().opt_attr & kCapEvEventPreciseDropCnt);
}

TEST_F(CtlEvents, Conf18_ExactlyOneEventPerProfileLevelTransition) {
  auto cq = *ctl.create_ev_event_cq(16);
  // Two QPs find EV 3 bad: one transition GOOD -> ASSUMED_BAD.
  report(100, 1, 3, MRC_CTL_ENGINE_GOOD, MRC_CTL_ENGINE_ASSUMED_BAD);
  report(200, 7, 3, MRC_CTL_ENGINE_GOOD, MRC_CTL_ENGINE_ASSUMED_BAD);
  ASSERT_TRUE(ctl.ingest_reports());
  auto ev = drain(*cq);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].profile_id, 5u);
  EXPECT_EQ(ev[0].ev, arr[3].ev);
  EXPECT_EQ(ev[0].state, kEvAssumedBad);
  EXPECT_EQ(ev[0].drop_count, 0u);
  EXPECT_EQ(ev[0].pid, 100u);
  EXPECT_EQ(state_of(5, arr[3].ev), kEvAssumedBad);
  // A SKIP of another EV is not a transition of the API state.
  report(100, 1, 4, MRC_CTL_ENGINE_GOOD, MRC_CTL_ENGINE_SKIP);
  // The first QP recovers: the EV is still held bad by the second.
  report(100, 1, 3, MRC_CTL_ENGINE_ASSUMED_BAD, MRC_CTL_ENGINE_GOOD);
  ASSERT_TRUE(ctl.ingest_reports());
  EXPECT_TRUE(drain(*cq).empty());
  // The second recovers: one GOOD event.
  report(200, 7, 3, MRC_CTL_ENGINE_ASSUMED_BAD, MRC_CTL_ENGINE_GOOD);
  ASSERT_TRUE(ctl.ingest_reports());
  ev = drain(*cq);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].state, kEvGood);
  EXPECT_EQ(state_of(5, arr[3].ev), kEvGood);
  // The controller denying an EV is not maskable; allowing it again is GOOD.
  std::vector<EvOpEntry> m = {{arr[2].ev, {}, kEvDenied, 0}};
  ASSERT_TRUE(ev_op(5, kEvOpModifyEvState, m));
  EXPECT_TRUE(drain(*cq).empty());
  m[0].state = kEvGood;
  ASSERT_TRUE(ev_op(5, kEvOpModifyEvState, m));
  ev = drain(*cq);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].state, kEvGood);
  EXPECT_EQ(ev[0].reason, "controller allow");
  // Setting the same state again is no transition.
  ASSERT_TRUE(ev_op(5, kEvOpModifyEvState, m));
  EXPECT_TRUE(drain(*cq).empty());
}

TEST_F(CtlEvents, Conf18_EventMaskFilters) {
  ASSERT_TRUE(set_state(5, kProfileOffline));
  EvProfileAttr a;
  a.ev_event_mask = kEvAssumedBad;
  ASSERT_TRUE(ctl.modify_ev_profile(5, a, kEvpAttrEventMask));
  ASSERT_TRUE(set_state(5, kProfileOnline));
  auto cq = *ctl.create_ev_event_cq(16);
  report(100, 1, 1, MRC_CTL_ENGINE_GOOD, MRC_CTL_ENGINE_ASSUMED_BAD);
  report(100, 1, 1, MRC_CTL_ENGINE_ASSUMED_BAD, MRC_CTL_ENGINE_GOOD);
  ASSERT_TRUE(ctl.ingest_reports());
  auto ev = drain(*cq);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].state, kEvAssumedBad);
  // The profile-level state still followed (only the event was masked).
  EXPECT_EQ(state_of(5, arr[1].ev), kEvGood);
}

TEST_F(CtlEvents, Conf18_OverflowIsCountedInDropCountNotOverrun) {
  auto cq = *ctl.create_ev_event_cq(2);
  // Six transitions on six EVs into a CQ of 2: 2 delivered, 4 dropped.
  for (size_t i = 0; i < 6; i++) report(100, 1, i, MRC_CTL_ENGINE_GOOD, MRC_CTL_ENGINE_ASSUMED_BAD);
  ASSERT_TRUE(ctl.ingest_reports());
  auto ev = drain(*cq);
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].drop_count, 0u);
  EXPECT_EQ(ev[1].drop_count, 0u);
  EXPECT_EQ(cq->dropped_total(), 4u);
  // The next event that gets in carries exactly the 4 lost ones.
  report(100, 1, 0, MRC_CTL_ENGINE_ASSUMED_BAD, MRC_CTL_ENGINE_GOOD);
  report(100, 1, 1, MRC_CTL_ENGINE_ASSUMED_BAD, MRC_CTL_ENGINE_GOOD);
  ASSERT_TRUE(ctl.ingest_reports());
  ev = drain(*cq);
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].drop_count, 4u);
  EXPECT_EQ(ev[1].drop_count, 0u);
  EXPECT_EQ(ev[0].ev, arr[0].ev);
}

TEST_F(CtlEvents, Conf18_ReportsLostUpstreamCountAsDropped) {
  store.set_queue_capacity(3);
  auto cq = *ctl.create_ev_event_cq(64);
  for (size_t i = 0; i < 5; i++) {
    mrc_ctl_ev_report r{};
    r.profile_id = 5;
    r.pid = 100;
    r.qpn = 1;
    r.wire = ctl.ev_entries(5)[i].wire;
    r.port = arr[i].ev.port;
    r.to = MRC_CTL_ENGINE_ASSUMED_BAD;
    Status s = store.record_push(r);
    EXPECT_EQ(s.ok(), i < 3);
  }
  EXPECT_EQ(store.dev().evq_dropped, 2u);
  ASSERT_TRUE(ctl.ingest_reports());
  auto ev = drain(*cq);
  ASSERT_EQ(ev.size(), 3u);
  // The two lost reports reach the CQ with the next delivered event.
  report(100, 1, 7, MRC_CTL_ENGINE_GOOD, MRC_CTL_ENGINE_ASSUMED_BAD);
  ASSERT_TRUE(ctl.ingest_reports());
  ev = drain(*cq);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].drop_count, 2u);
  EXPECT_EQ(ctl.counters().upstream_drops, 2u);
}

TEST_F(CtlEvents, Conf18_HoldsOfExitedProcessesAreReleased) {
  auto cq = *ctl.create_ev_event_cq(16);
  report(100, 1, 3, MRC_CTL_ENGINE_GOOD, MRC_CTL_ENGINE_ASSUMED_BAD);
  ASSERT_TRUE(ctl.ingest_reports());
  EXPECT_EQ(drain(*cq).size(), 1u);
  alive.erase(100);
  ctl.reap_dead();
  auto ev = drain(*cq);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].state, kEvGood);
  EXPECT_EQ(ev[0].reason, "holder exited");
}

TEST_F(CtlEvents, Conf18_CqSizeIsChecked) {
  EXPECT_EQ(ctl.create_ev_event_cq(0).error().code, EINVAL);
  EXPECT_EQ(ctl.create_ev_event_cq(-3).error().code, EINVAL);
  EXPECT_TRUE(ctl.create_ev_event_cq(1));
}

// --- 19. ev_min_active > ev_count ----------------------------------------------------

TEST_F(CtlTest, Conf19_MinActiveAboveCountIsRejected) {
  ASSERT_TRUE(fmt(13, {16, 16}));
  EXPECT_EQ(evp_offline(5, kEvModeGen, 13, 8, {{8, 0, 0, 7, 0x7}}, 9).error().code, EINVAL);
  ASSERT_TRUE(evp_offline(5, kEvModeGen, 13, 8, {{8, 0, 0, 7, 0x7}}, 8));
  EvProfileAttr a;
  a.ev_min_active = 9;
  EXPECT_EQ(ctl.modify_ev_profile(5, a, kEvpAttrMinActive).error().code, EINVAL);
  a.ev_count = 4;  // below the current min_active of 8
  EXPECT_EQ(ctl.modify_ev_profile(5, a, kEvpAttrCount).error().code, EINVAL);
  a.ev_min_active = 4;
  EXPECT_TRUE(ctl.modify_ev_profile(5, a, kEvpAttrCount | kEvpAttrMinActive));
  EXPECT_EQ(ctl.ev_entries(5).size(), 4u);
  // AUTO: the implementation's per-QP count bounds it.
  EvProfileAttr au;
  au.profile_state = kProfileOffline;
  au.ev_mode = kEvModeAuto;
  au.ev_min_active = ctl.limits().auto_ev_count + 1;
  EXPECT_EQ(
      ctl.modify_ev_profile(6, au, kEvpAttrState | kEvpAttrMode | kEvpAttrMinActive).error().code,
      EINVAL);
  au.ev_min_active = 32;
  au.ev_event_mask = kEvAssumedBad;
  ASSERT_TRUE(ctl.modify_ev_profile(
      6, au, kEvpAttrState | kEvpAttrMode | kEvpAttrMinActive | kEvpAttrEventMask));
  ASSERT_TRUE(set_state(6, kProfileOnline));
}

// --- ports, device, pool -------------------------------------------------------------

TEST_F(CtlTest, PortAdminStateIsQueriedAndModified) {
  PortAttr p;
  ASSERT_TRUE(ctl.query_port(2, &p, kPortAttrAdminState));
  EXPECT_EQ(p.port_admin_state, kPortAdminEnabled);
  p.port_admin_state = kPortAdminDisabled;
  ASSERT_TRUE(ctl.modify_port(2, p, kPortAttrAdminState));
  PortAttr q;
  ASSERT_TRUE(ctl.query_port(2, &q, kPortAttrAdminState));
  EXPECT_EQ(q.port_admin_state, kPortAdminDisabled);
  EXPECT_EQ(store.dev().admin_down_mask, 1u << 2);
  EXPECT_EQ(store.dev().port_down_mask, 1u << 2);
  EXPECT_EQ(ctl.modify_port(9, p, kPortAttrAdminState).error().code, EINVAL);
  EXPECT_EQ(ctl.modify_port(0, p, kPortAttrAdminState).error().code, EINVAL);
  EXPECT_EQ(ctl.query_port(2, &q, 0x2).error().code, EINVAL);
  p.port_admin_state = 5;
  EXPECT_EQ(ctl.modify_port(2, p, kPortAttrAdminState).error().code, EINVAL);
  ASSERT_TRUE(ctl.set_link(3, false));
  EXPECT_EQ(store.dev().port_down_mask, (1u << 2) | (1u << 3));
  EXPECT_EQ(store.dev().admin_down_mask, 1u << 2);
}

TEST_F(CtlTest, DeviceAttributesDescribeWhatIsSupported) {
  DeviceAttr d = ctl.query_device();
  EXPECT_EQ(d.phy_port_mask, 0x1eu);
  EXPECT_EQ(d.cc.algorithms, std::vector<std::string>{"uet-1.0-nscc"});
  EXPECT_EQ(d.ev.ev_mode_mask, uint32_t(kEvModeAuto | kEvModeExp | kEvModeGen));
  EXPECT_EQ(d.opt_attr, uint32_t(kCapEvEvent | kCapEvEventPreciseDropCnt | kCapEpOpEvProbe));
  EXPECT_EQ(d.ev.ev_max_count, uint32_t(MRC_CTL_EV_POOL));
  ASSERT_TRUE(fmt(13, {16, 16}));
  ASSERT_TRUE(evp_offline(5, kEvModeGen, 13, 100, {{8, 0, 0, 7, 0x7}}));
  EXPECT_EQ(ctl.query_device().ev.ev_free_count, uint32_t(MRC_CTL_EV_POOL - 100));
}

TEST_F(CtlTest, EvPoolIsAllocatedAndReused) {
  ASSERT_TRUE(fmt(13, {16, 16}));
  const uint32_t per = MRC_CTL_EV_MAX_PER_PROFILE;
  const uint32_t fit = MRC_CTL_EV_POOL / per;  // 16 profiles of 4096 fill the pool
  for (uint32_t i = 0; i < fit; i++)
    ASSERT_TRUE(evp_offline(100 + i, kEvModeGen, 13, per, {{8, 0, 0, 7, 0x7}})) << i;
  EXPECT_EQ(ctl.query_device().ev.ev_free_count, 0u);
  EXPECT_EQ(evp_offline(200, kEvModeGen, 13, 1, {{8, 0, 0, 7, 0x7}}).error().code, E2BIG);
  ASSERT_TRUE(set_state(103, kProfileInit));
  ASSERT_TRUE(evp_offline(200, kEvModeGen, 13, per, {{8, 0, 0, 7, 0x7}}));
  EXPECT_EQ(ctl.ev_record(200)->base, 3 * per);
}

TEST_F(CtlTest, RestartKeepsProfilesAndRepairsTornRecords) {
  ASSERT_TRUE(fmt(13, {16, 16}));
  ASSERT_TRUE(evp_offline(5, kEvModeGen, 13, 8, {{8, 0, 0, 7, 0x7}}));
  ASSERT_TRUE(set_state(5, kProfileOnline));
  store.regions().evps[size_t(0)].seq |= 1;  // a writer died mid-write
  Controller again(store);
  EXPECT_TRUE(again.open());
  EXPECT_EQ(again.ev_record(5)->cur_state, uint32_t(kProfileOnline));
  EXPECT_EQ(again.ev_record(5)->seq & 1, 0u);
  EXPECT_EQ(store.dev().restarts, 1u);  // the fixture's open() found it fresh
}

}  // namespace
}  // namespace mrc::testing
