// SPDX-License-Identifier: (GPL-2.0 OR BSD-3-Clause)
//
// fi_getinfo of the mrc provider: what it offers and how hints narrow it.
// No libmrc here (the unit tests call it directly).
#pragma once

#include <netinet/in.h>

#include <cstdint>
#include <string>

#include <rdma/fabric.h>

namespace mrc::fi {

inline constexpr const char* kProvName = "mrc";
inline constexpr const char* kFabricName = "mrc";
inline constexpr uint32_t kProvVersion = FI_VERSION(0, 1);

// The capabilities of an mrc endpoint: messages (over WRITE-with-immediate),
// RMA write and read (read emulated by a request the target answers with a
// WRITE), remote CQ data.
inline constexpr uint64_t kCaps = FI_MSG | FI_RMA | FI_SEND | FI_RECV | FI_READ | FI_WRITE |
                                  FI_REMOTE_READ | FI_REMOTE_WRITE | FI_REMOTE_COMM;
inline constexpr uint64_t kMrMode =
    FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_ALLOCATED;

struct InfoConfig {
  std::string domain;    // the plane set, e.g. "eth1+eth2+eth3+eth4"
  struct in_addr local;  // the host's address on plane 0 (CM side channel)
  size_t max_msg_size;
  size_t inject_size;
  size_t tx_size;
  size_t rx_size;
  size_t cm_data_size;
};

// Builds the fi_info list for (node, service, flags, hints). Returns 0 and
// *out, or -FI_ENODATA when the hints ask for what the provider lacks (the
// reason is written to *why when why is not NULL), or another -FI_E*.
int build_info(uint32_t version, const InfoConfig& cfg, const char* node, const char* service,
               uint64_t flags, const struct fi_info* hints, struct fi_info** out, std::string* why);

}  // namespace mrc::fi
