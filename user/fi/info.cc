// SPDX-License-Identifier: (GPL-2.0 OR BSD-3-Clause)
#include "fi/info.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>

#include <cstdlib>
#include <cstring>

#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>

namespace mrc::fi {
namespace {

int fail(std::string* why, const std::string& s) {
  if (why) *why = s;
  return -FI_ENODATA;
}

// node/service -> an IPv4 socket address (node NULL: `dflt`).
int resolve(const char* node, const char* service, struct in_addr dflt, struct sockaddr_in* sa) {
  std::memset(sa, 0, sizeof *sa);
  sa->sin_family = AF_INET;
  sa->sin_addr = dflt;
  if (node) {
    struct addrinfo hints = {}, *res = nullptr;
    hints.ai_family = AF_INET;
    if (getaddrinfo(node, nullptr, &hints, &res) || !res) return -FI_ENODATA;
    sa->sin_addr = reinterpret_cast<struct sockaddr_in*>(res->ai_addr)->sin_addr;
    freeaddrinfo(res);
  }
  if (service) {
    char* end = nullptr;
    long p = std::strtol(service, &end, 10);
    if (!*service || *end || p < 0 || p > 65535) return -FI_ENODATA;
    sa->sin_port = htons(uint16_t(p));
  }
  return 0;
}

bool addr_ok(const void* addr, size_t len) {
  return addr && len == sizeof(struct sockaddr_in) &&
         static_cast<const struct sockaddr*>(addr)->sa_family == AF_INET;
}

void* dup_addr(const struct sockaddr_in& sa) {
  auto* p = static_cast<struct sockaddr_in*>(std::malloc(sizeof sa));
  if (p) *p = sa;
  return p;
}

// What the hints ask of caps, endpoint, addresses, domain and MR mode; narrows
// caps, mr_mode and threading to what they ask.
int check_hints(const InfoConfig& cfg, const struct fi_info* hints, uint64_t* caps_out,
                uint64_t* mr_out, enum fi_threading* thr_out, std::string* why) {
  uint64_t& caps = *caps_out;
  uint64_t& mr_mode = *mr_out;
  enum fi_threading& threading = *thr_out;
  if (hints->caps & ~kCaps)
    return fail(why, "capabilities beyond FI_MSG, FI_RMA (read/write), remote CQ data");
  if (hints->caps) caps = hints->caps | FI_REMOTE_COMM;
  if (hints->ep_attr && hints->ep_attr->type != FI_EP_UNSPEC && hints->ep_attr->type != FI_EP_MSG)
    return fail(why, "endpoint type other than FI_EP_MSG (use mrc;ofi_rxm for RDM)");
  if (hints->ep_attr && hints->ep_attr->max_msg_size > cfg.max_msg_size)
    return fail(why, "max_msg_size above the provider's");
  if (hints->ep_attr && hints->ep_attr->msg_prefix_size) return fail(why, "message prefixes");
  if (hints->addr_format != FI_FORMAT_UNSPEC && hints->addr_format != FI_SOCKADDR &&
      hints->addr_format != FI_SOCKADDR_IN)
    return fail(why, "address format other than FI_SOCKADDR_IN");
  if (hints->fabric_attr && hints->fabric_attr->name &&
      std::strcmp(hints->fabric_attr->name, kFabricName))
    return fail(why, "fabric name");
  if (hints->src_addr && !addr_ok(hints->src_addr, hints->src_addrlen))
    return fail(why, "source address not an IPv4 sockaddr");
  if (hints->dest_addr && !addr_ok(hints->dest_addr, hints->dest_addrlen))
    return fail(why, "destination address not an IPv4 sockaddr");
  if (hints->tx_attr && hints->tx_attr->inject_size > cfg.inject_size)
    return fail(why, "inject_size above the provider's");
  if (hints->tx_attr && hints->tx_attr->size > cfg.tx_size)
    return fail(why, "tx size above the provider's");
  if (hints->rx_attr && hints->rx_attr->size > cfg.rx_size)
    return fail(why, "rx size above the provider's");
  if (hints->ep_attr && hints->ep_attr->rx_ctx_cnt == FI_SHARED_CONTEXT)
    return fail(why, "shared receive contexts");
  if (const struct fi_domain_attr* d = hints->domain_attr) {
    if (d->name && cfg.domain != d->name)
      return fail(why, "domain name (the plane set is " + cfg.domain + ")");
    if (d->data_progress == FI_PROGRESS_AUTO || d->control_progress == FI_PROGRESS_AUTO)
      return fail(why, "automatic progress (the provider progresses in its calls)");
    if (d->mr_mode & (FI_MR_SCALABLE)) return fail(why, "FI_MR_SCALABLE (keys are provider keys)");
    if (d->mr_mode != FI_MR_UNSPEC && d->mr_mode != FI_MR_BASIC &&
        (kMrMode & ~FI_MR_ALLOCATED & ~d->mr_mode))
      return fail(why, "mr_mode without FI_MR_LOCAL, FI_MR_VIRT_ADDR, FI_MR_PROV_KEY");
    if (d->mr_mode != FI_MR_UNSPEC && d->mr_mode != FI_MR_BASIC)
      mr_mode = d->mr_mode & (kMrMode | FI_MR_ENDPOINT | FI_MR_RAW | FI_MR_RMA_EVENT |
                              FI_MR_MMU_NOTIFY | FI_MR_HMEM);
    if (d->mr_mode == FI_MR_BASIC) mr_mode = FI_MR_BASIC;
    if (d->cq_data_size > 8) return fail(why, "cq_data_size above 8");
    if (d->threading != FI_THREAD_UNSPEC) threading = d->threading;
  }
  return 0;
}

}  // namespace

int build_info(uint32_t version, const InfoConfig& cfg, const char* node, const char* service,
               uint64_t flags, const struct fi_info* hints, struct fi_info** out,
               std::string* why) {
  (void)version;
  *out = nullptr;
  uint64_t caps = kCaps;
  uint64_t mr_mode = kMrMode;
  enum fi_threading threading = FI_THREAD_SAFE;

  if (hints) {
    int r = check_hints(cfg, hints, &caps, &mr_mode, &threading, why);
    if (r) return r;
  }

  struct sockaddr_in src, dst;
  bool have_dst = false;
  if (flags & FI_SOURCE) {
    if (resolve(node, service, cfg.local, &src))
      return fail(why, "cannot resolve the source node/service");
  } else {
    if (resolve(nullptr, node ? nullptr : service, cfg.local, &src))
      return fail(why, "cannot resolve the service");
    if (node) {
      if (resolve(node, service, cfg.local, &dst))
        return fail(why, "cannot resolve the destination node/service");
      have_dst = true;
    }
  }
  if (hints && hints->src_addr) std::memcpy(&src, hints->src_addr, sizeof src);
  if (hints && hints->dest_addr) {
    std::memcpy(&dst, hints->dest_addr, sizeof dst);
    have_dst = true;
  }

  struct fi_info* fi = fi_allocinfo();
  if (!fi) return -FI_ENOMEM;
  fi->caps = caps;
  fi->mode = 0;
  fi->addr_format = FI_SOCKADDR_IN;
  fi->src_addr = dup_addr(src);
  fi->src_addrlen = sizeof src;
  if (have_dst) {
    fi->dest_addr = dup_addr(dst);
    fi->dest_addrlen = sizeof dst;
  }

  struct fi_tx_attr* tx = fi->tx_attr;
  tx->caps = caps & (FI_MSG | FI_RMA | FI_SEND | FI_READ | FI_WRITE);
  tx->op_flags = hints && hints->tx_attr ? hints->tx_attr->op_flags & FI_COMPLETION : 0;
  tx->msg_order = FI_ORDER_SAS | FI_ORDER_SAW | FI_ORDER_WAS | FI_ORDER_WAW | FI_ORDER_RAW |
                  FI_ORDER_RAR | FI_ORDER_RAS | FI_ORDER_WAR | FI_ORDER_SAR;
  tx->comp_order = FI_ORDER_STRICT;
  tx->inject_size = cfg.inject_size;
  tx->size = cfg.tx_size;
  tx->iov_limit = 4;
  tx->rma_iov_limit = 1;

  struct fi_rx_attr* rx = fi->rx_attr;
  rx->caps = caps & (FI_MSG | FI_RMA | FI_RECV | FI_REMOTE_READ | FI_REMOTE_WRITE);
  rx->op_flags = 0;
  rx->msg_order = tx->msg_order;
  rx->comp_order = FI_ORDER_STRICT;
  rx->total_buffered_recv = 0;
  rx->size = cfg.rx_size;
  rx->iov_limit = 4;

  struct fi_ep_attr* ep = fi->ep_attr;
  ep->type = FI_EP_MSG;
  ep->protocol = FI_PROTO_UNSPEC;
  ep->protocol_version = 1;
  ep->max_msg_size = cfg.max_msg_size;
  ep->msg_prefix_size = 0;
  ep->max_order_raw_size = cfg.max_msg_size;
  ep->max_order_war_size = cfg.max_msg_size;
  ep->max_order_waw_size = cfg.max_msg_size;
  ep->tx_ctx_cnt = 1;
  ep->rx_ctx_cnt = 1;

  struct fi_domain_attr* d = fi->domain_attr;
  d->name = strdup(cfg.domain.c_str());
  d->threading = threading;
  d->control_progress = FI_PROGRESS_MANUAL;
  d->data_progress = FI_PROGRESS_MANUAL;
  d->resource_mgmt = FI_RM_ENABLED;
  d->av_type = FI_AV_UNSPEC;
  d->mr_mode = int(mr_mode);
  d->mr_key_size = 4;
  d->cq_data_size = 8;
  d->cq_cnt = 1024;
  d->ep_cnt = 1024;
  d->tx_ctx_cnt = 1024;
  d->rx_ctx_cnt = 1024;
  d->max_ep_tx_ctx = 1;
  d->max_ep_rx_ctx = 1;
  d->max_ep_stx_ctx = 0;
  d->max_ep_srx_ctx = 0;
  d->cntr_cnt = 0;
  d->mr_iov_limit = 1;
  d->caps = FI_REMOTE_COMM;
  d->mode = 0;
  d->mr_cnt = 65536;

  struct fi_fabric_attr* f = fi->fabric_attr;
  f->name = strdup(kFabricName);
  // prov_name stays NULL: libfabric fills it in (and appends ofi_rxm's name when layered)
  f->prov_version = kProvVersion;
  f->api_version = FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION);

  if (!fi->src_addr || (have_dst && !fi->dest_addr) || !d->name || !f->name) {
    fi_freeinfo(fi);
    return -FI_ENOMEM;
  }
  *out = fi;
  return 0;
}

}  // namespace mrc::fi
