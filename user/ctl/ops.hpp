// The operation names of mrcd's control protocol (ctl/proto.hpp): the "op"
// of a request, "OBJECT.VERB" or a bare verb. Defined once here and used by
// mrcd (user/mrcd/ops.cc, its handler table) and mrcctl (user/tools/mrcctl.cc);
// nowhere else is an operation name spelt out. The argument and result
// schemas of every operation are in Documentation/observability.md
// ("mrcctl JSON"); a new operation is added here, to mrcd's handler table and
// to that page.
//
// This header has no dependencies, so that clients which do not link the
// controller (mrcctl) can include it.
#pragma once

namespace mrc::ctl::proto::op {

// The daemon
inline constexpr char kPing[] = "ping";  // protocol version and pid
inline constexpr char kStats[] = "stats";

// Device and ports
inline constexpr char kDevShow[] = "dev.show";
inline constexpr char kPortShow[] = "port.show";
inline constexpr char kPortSet[] = "port.set";

// EV format profiles
inline constexpr char kEvFmtShow[] = "ev_fmt.show";
inline constexpr char kEvFmtModify[] = "ev_fmt.modify";
inline constexpr char kEvFmtDelete[] = "ev_fmt.delete";

// EV profiles
inline constexpr char kEvProfileShow[] = "ev_profile.show";
inline constexpr char kEvProfileModify[] = "ev_profile.modify";
inline constexpr char kEvProfileDelete[] = "ev_profile.delete";

// The EVs of an EV profile
inline constexpr char kEvShow[] = "ev.show";
inline constexpr char kEvSet[] = "ev.set";
inline constexpr char kEvPopulate[] = "ev.populate";
inline constexpr char kEvReplace[] = "ev.replace";

// CC profiles
inline constexpr char kCcProfileShow[] = "cc_profile.show";
inline constexpr char kCcProfileModify[] = "cc_profile.modify";
inline constexpr char kCcProfileDelete[] = "cc_profile.delete";

// Endpoint operations (ENDPOINT_REQUEST on the wire)
inline constexpr char kProbe[] = "probe";

// Reports and observability
inline constexpr char kQpShow[] = "qp.show";
inline constexpr char kPolicyShow[] = "policy.show";
inline constexpr char kMonitor[] = "monitor";  // the connection becomes an event stream

// Every operation above (the tests check that mrcd has a handler for each).
inline constexpr const char* kAll[] = {kPing,
                                       kStats,
                                       kDevShow,
                                       kPortShow,
                                       kPortSet,
                                       kEvFmtShow,
                                       kEvFmtModify,
                                       kEvFmtDelete,
                                       kEvProfileShow,
                                       kEvProfileModify,
                                       kEvProfileDelete,
                                       kEvShow,
                                       kEvSet,
                                       kEvPopulate,
                                       kEvReplace,
                                       kCcProfileShow,
                                       kCcProfileModify,
                                       kCcProfileDelete,
                                       kProbe,
                                       kQpShow,
                                       kPolicyShow,
                                       kMonitor};

}  // namespace mrc::ctl::proto::op
