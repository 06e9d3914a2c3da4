// libmrc's client backend of service mode (Documentation/service.md): a
// Context opened while mrc-serviced runs keeps no device of its own. Control
// calls go over the service's socket (proto.hpp), posts and completions
// through the shared area's rings (shm.hpp). Context dispatches to this class
// when Context::Impl::svc is set; Qp/Cq/CompChannel keep pointers to the
// client-side objects below in their opaque fields.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "lib/context_impl.hpp"
#include "mrc/mrc.hpp"
#include "svc/proto.hpp"
#include "svc/shm.hpp"
#include "util/unique_fd.hpp"

namespace mrc::svc {

// The service socket: o.service_socket, $MRC_SERVICE_SOCKET, or the default.
std::string socket_path(const DeviceOptions& o);
// A connected SOCK_SEQPACKET socket to the service; the error keeps the
// connect errno (ENOENT, ECONNREFUSED ...).
Result<UniqueFd> connect_service(const std::string& path);
// "the planes are held by mrc-serviced (pid N at PATH)" when a service
// accepts connections at path, else empty.
std::string service_holder(const std::string& path);
// "ENOENT", "ECONNREFUSED" ... (the errno's name).
std::string errno_name(int e);

class Client;
struct ClientChannel;

struct ClientCq {
  Client* c = nullptr;
  uint32_t h = 0;
  CqLayout lay{};
  CqCtl* ctl = nullptr;
  ClientRing<Wc> ring;
  ClientChannel* ch = nullptr;
  Cq* cq = nullptr;
};

// What libmrc itself remembers of a QP's posts (service.md section 5): the
// wr_id of each send and receive at its ring index, so that when the
// service dies the client can complete everything after the QP's
// sq_retired / rq_retired with WR_FLUSH_ERR. 2x the ring: a QP holds at most
// a ring's worth unread plus the engine's queue (<= the ring's size).
struct Shadow {
  std::vector<uint64_t> sq, rq;
  uint64_t sq_mask = 0, rq_mask = 0;
};

struct ClientQp {
  Client* c = nullptr;
  uint32_t h = 0, qpn = 0;
  QpLayout lay{};
  QpCtl* ctl = nullptr;
  ClientRing<Sqe> sq;
  ClientRing<Rqe> rq;
  uint32_t scq_h = 0, rcq_h = 0;
  Shadow shadow;
};

struct ClientChannel {
  Client* c = nullptr;
  uint32_t h = 0;
  int fd = -1;  // the read end of the channel's pipe (the CompChannel owns it)
};

class Client {
 public:
  // HELLO on a connected socket; fills im's ports, idx, max_path_mtu,
  // rx_frame_cap and tx_note from the reply.
  static Result<std::unique_ptr<Client>> open(UniqueFd sock, const std::string& path,
                                              Context::Impl& im);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  pid_t service_pid() const { return svc_pid_; }
  const DeviceAttr& attr() const { return attr_; }
  bool tx_live() const { return tx_live_; }
  int async_fd() const { return async_fd_.get(); }
  bool get_async_event(AsyncEvent& ev);

  Result<uint32_t> alloc_pd();
  Status dealloc_pd(uint32_t pd);
  Result<MemoryRegion> reg_mr(uint32_t pd, void* addr, size_t length, uint32_t access);
  Status dereg_mr(const MemoryRegion& mr);
  // The ClientChannel (CompChannel::state_) and the read end of its pipe
  // (CompChannel::fd_, owned by the channel from then on).
  struct Channel {
    void* state = nullptr;
    int fd = -1;
  };
  Result<Channel> create_channel();
  struct Made {
    uint32_t h = 0, qpn = 0;
    void* ring = nullptr;
    void* post = nullptr;
  };
  Result<Made> create_cq(uint32_t cqe, void* channel_state, Cq* cq);
  Status destroy_cq(void* ring);
  Result<Made> create_qp(const QpInitAttr& init);
  Status destroy_qp(void* post);
  Status modify_qp(void* post, const QpAttr& attr, uint32_t ibv_mask, uint32_t mrc_mask);
  Result<QpAttr> query_qp(void* post);
  Result<QpAttr> query_qpn(uint32_t qpn);
  Result<QpStats> qp_stats(void* post);
  Result<StatsRep> stats();
  std::vector<uint32_t> qp_list();

  // The data path (lock-free, any thread).
  static Status post_send(void* post, const SendWr& wr);
  static Status post_recv(void* post, const RecvWr& wr);
  static Result<size_t> poll(void* ring, std::span<Wc> out);
  static Status req_notify(void* ring);
  static Result<Cq*> get_event(void* channel, int fd);

 private:
  Client() = default;
  // One request and its reply (serialized); the reply's payload, or the
  // service's error; EIO once the service is gone.
  Result<Msg> call(Op op, const void* req, size_t len, const int* fds = nullptr, size_t nfds = 0);
  Error gone() const;
  Error gone_flushed();
  void mark_dead(const std::string& why);
  // Flush completions and death events (obj_mu_ held, dead_ set).
  void flush_dead();
  void monitor();
  void ring_doorbell(uint32_t qp_handle, ClientQp& q);
  void ring_bell();
  Status hello(Context::Impl& im);

  UniqueFd sock_, area_fd_, doorbell_, async_fd_, stop_fd_;
  bool bell_sock_ = false;  // the doorbell is a socket (send with MSG_NOSIGNAL)
  uint8_t* area_ = nullptr;
  uint64_t area_size_ = 0;
  AreaHdr* hdr_ = nullptr;
  ClientRing<uint32_t> ready_;
  ClientRing<AsyncEvent> async_;
  std::string path_;
  pid_t svc_pid_ = 0;
  DeviceAttr attr_{};
  bool tx_live_ = false;
  std::mutex call_mu_;  // one request at a time
  uint32_t seq_ = 0;
  std::atomic<bool> dead_{false};
  // Set after flush_dead() published every flush completion: a poll that
  // finds its CQ empty says EIO only then (dead_ alone comes first, so posts
  // racing with the flush fail; a poller that saw only dead_ would miss the
  // flushes still being written).
  std::atomic<bool> flushed_{false};
  std::string dead_why_;  // set once, before dead_
  std::mutex obj_mu_;     // the object lists
  std::vector<std::unique_ptr<ClientQp>> qps_;
  std::vector<std::unique_ptr<ClientCq>> cqs_;
  std::vector<std::unique_ptr<ClientChannel>> channels_;
  std::vector<AsyncEvent> dead_events_;  // written by flush_dead, under obj_mu_
  std::vector<uint8_t> port_nums_;       // the device's ports (HELLO): PORT_ERR each on death
  std::thread monitor_;
};

}  // namespace mrc::svc
