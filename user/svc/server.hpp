// mrc-serviced's service side (Documentation/service.md): it owns one
// in-process device (a Context in exclusive mode: the planes' AF_XDP sockets,
// the UMEM, the engine and its thread) and serves clients over a
// SOCK_SEQPACKET socket. The control thread (run()) accepts clients, reads
// their credentials and answers their requests under the engine lock; the
// engine thread, through lib::LoopHook, drains the clients' post rings into
// the engine and writes their completions and events into their rings.
//
// Every value a client writes (messages, ring entries, indexes, handles) is
// untrusted: messages are checked for their exact shape, ring entries are
// copied once and the copy validated, handles are indexes into the client's
// own tables (another client's handle is answered as a nonexistent one,
// EINVAL). A client's misbehaviour costs an error reply, a counter, or that
// client's connection; never the service.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "lib/context_impl.hpp"
#include "mrc/mrc.hpp"
#include "svc/mapping.hpp"
#include "svc/proto.hpp"
#include "svc/shm.hpp"
#include "util/unique_fd.hpp"

namespace mrc::svc {

// The service's engine defaults: its QPs belong to several processes, whose
// fair shares matter more than the last 20% of their aggregate. So NSCC's
// base RTT is shared by the QPs to one peer (EngineConfig::
// cc_share_base_rtt): Jain over 8 processes 0.999 against 0.87-0.96
// without (performance.md, "Fair shares"). `--engine cc_share_base_rtt=0`
// turns it off.
inline DeviceOptions service_device_defaults() {
  DeviceOptions d;
  d.engine.cc_share_base_rtt = true;
  return d;
}

struct ServerOptions {
  DeviceOptions dev = service_device_defaults();  // the planes (mode is forced to exclusive)
  std::string socket_path = kDefaultSocket;
  uint32_t socket_mode = 0660;
  gid_t socket_group = gid_t(-1);     // -1: leave the group as created
  uint64_t area_bytes = 64ull << 20;  // shared area per client
  uint32_t max_clients = 64;
  uint32_t max_qps = 1024, max_cqs = 1024, max_mrs = 4096, max_wr = 8192, max_cqe = 1 << 20;
  uint64_t max_mr_bytes = 0;         // registered bytes per process, 0: no limit
  uint32_t max_clients_per_uid = 0;  // 0: no limit
  // Where each limit was set, as the refusal names it: the option, or
  // "FILE [limits] KEY" when the configuration file set it (svc/config.hpp).
  struct LimitNames {
    std::string clients = "--max-clients", clients_per_uid = "--max-clients-per-uid";
    std::string area = "--area-mib", qps = "--max-qps", cqs = "--max-cqs", mrs = "--max-mrs";
    std::string mr_bytes = "--max-mr-mib", wr = "--max-wr", cqe = "--max-cqe";
  } limit_names;
  std::string metrics;  // Prometheus endpoint host:port; "" = none
  // A departed client's QPs stay this long as tombstones that refuse their
  // peers' requests (service.md section 5); 0: destroyed at once. Their
  // number is bounded by dev.engine.max_tombstones.
  uint32_t tomb_linger_ms = 5000;
};

struct ServerCounters {
  std::atomic<uint64_t> clients_total{0}, clients_now{0}, clients_broken{0};
  std::atomic<uint64_t> bad_requests{0}, bad_wqe{0}, bad_ready{0}, cq_overruns{0};
  std::atomic<uint64_t> bad_doorbell{0};  // clients that closed their end of the doorbell
};

class Server : public lib::LoopHook {
 public:
  static Result<std::unique_ptr<Server>> create(const ServerOptions& o);
  ~Server() override;
  // The control loop, until stop_fd becomes readable (a signalfd or an
  // eventfd of the caller) and on_stop_fd, when given, returns true; when it
  // returns false (a SIGHUP it handled by reload()) the loop goes on.
  Status run(int stop_fd, const std::function<bool()>& on_stop_fd = {});
  // Takes the reloadable settings of n (service.md, "Configuration",
  // reload): every limit and its source, and tomb_linger_ms. The limits on
  // clients, regions, bytes, WRs and CQEs apply at once, to every client;
  // area_mib to processes that connect afterwards; raised QP and CQ limits
  // to processes that connect afterwards (a connected one's ready ring was
  // sized for the limits it connected under), lowered ones to everyone.
  // Everything else needs a restart (restart_only_changes, config.hpp).
  // Which is which: the one table settings() of config.hpp (apply_reloadable).
  // Control thread; o_'s only writer, so it reads o_ without opt_mu_.
  void reload(const ServerOptions& n);
  // The settings in force (a copy: the metrics thread reads it).
  ServerOptions options() const;
  const ServerCounters& counters() const { return cnt_; }
  // Every client past HELLO, as OBSERVE and the metrics report them.
  std::vector<ObserveClient> observe();
  // The engine thread's scheduling asked for (the option or $MRC_ENGINE_SCHED).
  EngineSched sched_asked() const { return im_->sched_want; }
  Context& context() { return *ctx_; }

  // lib::LoopHook (engine thread, engine lock held)
  bool drain(core::Engine& eng) override;
  bool deliver(core::Engine& eng, std::span<Wc> scratch) override;
  bool qp_error(uint32_t qpn) override;
  void port_event(const AsyncEvent& ev) override;
  bool sleep_prepare(std::vector<pollfd>& fds) override;
  void woke() override;

  struct SQp;
  struct SCq;
  struct SMr;
  struct ClientState;

 private:
  Server() = default;
  Status listen_socket();
  void accept_client();
  void handle(ClientState& c);
  void drop(ClientState& c, const char* why);
  struct Reply {
    std::vector<uint8_t> payload;
    std::vector<UniqueFd> fds;
  };
  Result<Reply> dispatch(ClientState& c, Msg& m);
  Result<Reply> op_hello(ClientState& c, Msg& m);
  Result<Reply> op_reg_mr(ClientState& c, Msg& m);
  Result<Reply> op_create_cq(ClientState& c, const Msg& m);
  Result<Reply> op_create_qp(ClientState& c, const Msg& m);
  Result<Reply> op_modify_qp(ClientState& c, const Msg& m);
  Result<Reply> op_simple(ClientState& c, Msg& m);
  Result<Reply> op_destroy(ClientState& c, const Msg& m);
  Result<Reply> op_observe(const Msg& m);
  Status check_mr_bytes(const ClientState& c, uint64_t len) const;
  Status check_uid(const ClientState& c) const;
  void keep_qp_totals(core::Engine& eng, ClientState& c, uint32_t qpn);
  void free_client_locked(ClientState& c);
  void drain_qp(core::Engine& eng, ClientState& c, SQp& q);
  void push_async(ClientState& c, const AsyncEvent& ev);
  void sq_track(SQp& q, uint8_t kind);
  void retire(ClientState& c, const Wc* wc, size_t n);

  ServerOptions o_;            // written by the control thread only, under opt_mu_
  mutable std::mutex opt_mu_;  // for options() from other threads
  std::unique_ptr<Context> ctx_;
  Context::Impl* im_ = nullptr;
  UniqueFd listen_, epoll_;
  std::vector<std::unique_ptr<ClientState>> clients_;  // under im_->mu
  std::unordered_map<uint32_t, ClientState*> by_qpn_;  // under im_->mu
  uint32_t next_id_ = 1;
  size_t rot_ = 0;  // the client drain() and deliver() start with (engine thread)
  ServerCounters cnt_;
};

}  // namespace mrc::svc
