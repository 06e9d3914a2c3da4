#include "sim/cluster.hpp"

#include <algorithm>

namespace mrc::sim {

struct Cluster::Host {
  std::unique_ptr<core::Engine> eng;
  uint32_t id = 0;
  Network::TimerId timer;
  Time timer_at = kNever;
  bool in_service = false;
  std::vector<uint8_t> buf = std::vector<uint8_t>(16384);
};

namespace {
struct Sink : core::TxSink {
  Sink(Network& n, uint32_t host, uint32_t ring) : net(n), host(host), ring(ring) {}
  uint8_t* alloc(uint8_t port, uint32_t* cap) override {
    if (port == 0 || port > net.config().planes) return nullptr;
    if (net.queue_depth(net.uplink(host, port - 1u)) > ring) {
      blocked = true;
      return nullptr;
    }
    *cap = uint32_t(buf.size());
    return buf.data();
  }
  void commit(uint8_t port, uint32_t len) override {
    if (len) net.send(host, port - 1u, {buf.data(), len});
  }
  Network& net;
  uint32_t host, ring;
  bool blocked = false;
  std::vector<uint8_t> buf = std::vector<uint8_t>(16384);
};
}  // namespace

Cluster::Cluster(const ClusterOptions& o)
    : net_(std::make_unique<Network>(o.net)), ring_bytes_(o.tx_ring_bytes) {
  const NetConfig& nc = net_->config();
  for (uint32_t h = 0; h < nc.hosts; h++) {
    auto host = std::make_unique<Host>();
    host->id = h;
    core::EngineConfig ec = o.engine;
    ec.seed = o.engine.seed * 7919 + h;
    if (!ec.id_seed) ec.id_seed = ec.seed;  // reproducible QPNs and keys
    ec.ports.clear();
    for (uint32_t p = 0; p < nc.planes && p < core::kMaxPorts; p++)
      ec.ports.push_back({port_of(p), net_->mac_of(h, p), net_->ip_of(h, p), true});
    ec.codec.dscp = nc.dscp;
    ec.codec.udp_port = nc.udp_port;
    host->eng = std::make_unique<core::Engine>(ec);
    Host* hp = host.get();
    net_->attach(h, [this, hp](int port, std::span<const uint8_t> f, Time now) {
      core::RxFrame rf{f.data(), uint32_t(f.size()), port_of(uint32_t(port)), now};
      hp->eng->rx({&rf, 1}, now);
      service(hp->id);
    });
    net_->on_port_change(h, [this, hp](int port, bool up, Time now) {
      hp->eng->set_port_state(port_of(uint32_t(port)), up, now);
      service(hp->id);
    });
    hosts_.push_back(std::move(host));
  }
}

Cluster::~Cluster() = default;

core::Engine& Cluster::engine(uint32_t host) { return *hosts_[host]->eng; }

std::array<core::PlaneAddr, core::kMaxPorts + 1> Cluster::av_of(uint32_t host) const {
  std::array<core::PlaneAddr, core::kMaxPorts + 1> av{};
  for (uint32_t p = 0; p < net_->config().planes && p < core::kMaxPorts; p++)
    av[port_of(p)] = {net_->ip_of(host, p), net_->mac_of(host, p), true};
  return av;
}

void Cluster::kick(uint32_t host) { service(host); }

void Cluster::service(uint32_t h) {
  Host& host = *hosts_[h];
  if (host.in_service) return;  // a frame sent from here looped back at once
  host.in_service = true;
  Sink sink(*net_, h, ring_bytes_);
  const Time now = net_->now();
  while (host.eng->tx(sink, now, 64) > 0) {
  }
  host.eng->tx_done(now);  // the simulated transmit takes no time
  host.in_service = false;
  // Next wake-up: the engine's own deadline, or soon when the uplinks pushed
  // back while it still had frames to send.
  Time t = host.eng->next_deadline();
  if ((sink.blocked || t == 0) && host.eng->tx_ready()) t = now + 2 * kUs;
  if (t == 0) t = now + 2 * kUs;
  if (t == core::kNever) return;
  t = std::max(t, now + 1);
  if (host.timer_at <= t) return;  // an earlier wake-up will reschedule
  if (host.timer_at != kNever) net_->cancel(host.timer);
  host.timer_at = t;
  host.timer = net_->at(t, [this, h] {
    hosts_[h]->timer_at = kNever;
    service(h);
  });
}

bool Cluster::run_until(const std::function<bool()>& done, Time deadline) {
  return net_->run_until_done(done, deadline);
}

}  // namespace mrc::sim
