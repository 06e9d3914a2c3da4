// IP addresses as text: the one parser and formatter of codec::IpAddr that
// mrcd, mrcctl's protocol and libmrc use.
#pragma once

#include <string>

#include "codec/packet.hpp"
#include "mrc/result.hpp"

namespace mrc::codec {

// "198.18.0.1" or "fd00::1"; EINVAL for anything else.
Result<IpAddr> parse_ip(const std::string& s);
// The usual text form (inet_ntop).
std::string to_string(const IpAddr& a);

}  // namespace mrc::codec
