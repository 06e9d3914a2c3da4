// mrcd's control socket: a unix stream socket (mode 0660, optionally owned by
// a configured group) speaking the line-delimited JSON of ctl/proto.hpp.
// Every connection's peer is identified with SO_PEERCRED; calls that modify
// state (and endpoint operations) need CAP_NET_ADMIN in the caller's
// effective set, anything else is read-only and open to whoever may connect.
// Denied calls fail with EPERM, as mrc_ctl.h specifies.
#pragma once

#include <poll.h>
#include <sys/types.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ctl/controller.hpp"
#include "ctl/ep.hpp"
#include "ctl/proto.hpp"
#include "mrc/result.hpp"
#include "mrcd/policy.hpp"
#include "util/unique_fd.hpp"

namespace mrc::mrcd {

struct PeerCred {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
  bool net_admin = false;  // CAP_NET_ADMIN in the effective set
};
// Credentials of the process at the other end of a unix socket.
Result<PeerCred> peer_cred(int fd);
// True for operations that need CAP_NET_ADMIN (their entry in the handler
// table, mrcd/ops.cc, says so).
bool op_modifies(const std::string& op);

// One client connection of the control socket.
struct Conn {
  UniqueFd sock;  // owns fd
  int fd = -1;    // sock.get(), the key in Server's table
  PeerCred cred;
  std::string in, out;
  std::shared_ptr<ctl::EvEventCq> cq;  // monitor with events
  bool decisions = false;              // monitor with decisions
  bool closing = false;
};
// A probe whose answer comes when its batch is done (Server::on_batch_done).
struct PendingProbe {
  int fd = -1;
  ctl::proto::json id;
  ctl::proto::json req;  // what was asked (dst, evs) for the reply
};

class Server {
 public:
  struct Deps {
    ctl::Controller* ctl = nullptr;
    ctl::EpBatcher* ep = nullptr;  // endpoint operations (nullptr: ENOTSUP)
    Policy* policy = nullptr;
    std::function<ctl::proto::json()> stats;  // "stats"
    std::function<ctl::proto::json()> qps;    // "qp.show"
  };
  ~Server();
  static Result<std::unique_ptr<Server>> listen(const std::string& path, const std::string& group,
                                                Deps deps);

  // Event loop integration.
  void fill_pollfds(std::vector<pollfd>* out) const;
  void handle(const pollfd& p);
  // A probe batch finished: answers the connection that asked for it.
  void on_batch_done(const ctl::EpBatchDone& d);
  // Streams CQ events and decisions to `mrcctl monitor` connections.
  void flush_monitors();
  void on_decision(const Decision& d);
  size_t connections() const { return conns_.size(); }
  const std::string& path() const { return path_; }

  // One request line (no socket): for tests and for the dispatcher. Checks
  // the caller's capability, then runs the operation's handler (the table in
  // mrcd/ops.cc). Returns the response, or nullopt when it will come later
  // (probe).
  std::optional<ctl::proto::json> dispatch(int conn_fd, const PeerCred& cred,
                                           const ctl::proto::json& req);

  struct Counters {
    uint64_t accepted = 0, requests = 0, errors = 0, eperm = 0;
  };
  const Counters& counters() const { return ctr_; }

 private:
  Server() = default;
  void accept_all();
  void read_conn(Conn& c);
  void write_conn(Conn& c);
  void send_line(Conn& c, const ctl::proto::json& j);
  void drop(int fd);

  std::string path_;
  UniqueFd lfd_;
  Deps d_;
  std::map<int, Conn> conns_;
  std::map<uint64_t, PendingProbe> probes_;
  Counters ctr_;
};

}  // namespace mrc::mrcd
