// fabric_pkt: sends MRC frames built by the codec out of a fabric port and
// captures what arrives on another, parsing every frame with the codec. The
// fault tests measure the fault program with it.
//
//   fabric_pkt send --netns NS --dev IF --dst-mac MAC --src IP --dst IP
//                   [--count N] [--opcode write_only|write_only_imm|write_first|
//                   write_middle|write_last|write_last_imm|ack|sack]
//                   [--payload BYTES] [--ts] [--ecn not|ect0|ect1]
//                   [--sport N | --sport-range A-B] [--pps N] [--psn P]
//   fabric_pkt recv --netns NS --dev IF [--timeout-ms T] [--idle-ms I]
//                   [--ready FILE] [--max N]
//
// recv prints one JSON object: frame counts, codec parse results, trimmed
// headers (and whether their DSCP and length are right), ECN codepoints and
// duplicated PSNs.
#include <arpa/inet.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "codec/ip.hpp"
#include "codec/packet.hpp"
#include "fabric_util.hpp"

namespace mrc::fabric {
namespace {

using codec::IpVersion;
using nlohmann::json;

uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

bool parse_mac(const std::string& s, codec::Mac& m) {
  unsigned v[6];
  if (std::sscanf(s.c_str(), "%x:%x:%x:%x:%x:%x", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5]) != 6)
    return false;
  for (int i = 0; i < 6; i++) m[size_t(i)] = uint8_t(v[i]);
  return true;
}

bool parse_ip(const std::string& s, codec::IpAddr& a) {
  auto ip = codec::parse_ip(s);  // codec/ip.hpp
  if (ip) a = *ip;
  return static_cast<bool>(ip);
}

const std::map<std::string, uint8_t> kOpcodes = {
    {"write_first", MRC_OP_WRITE_FIRST},
    {"write_middle", MRC_OP_WRITE_MIDDLE},
    {"write_last", MRC_OP_WRITE_LAST},
    {"write_last_imm", MRC_OP_WRITE_LAST_IMM},
    {"write_only", MRC_OP_WRITE_ONLY},
    {"write_only_imm", MRC_OP_WRITE_ONLY_IMM},
    {"ack", MRC_OP_ACK},
    {"sack", MRC_OP_SACK},
};

Result<UniqueFd> packet_socket(const std::string& ns, const std::string& dev, int& ifindex) {
  auto scope = NetnsScope::enter(ns);
  if (!scope) return std::move(scope).error();
  UniqueFd fd(socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, htons(ETH_P_ALL)));
  if (!fd.valid()) return make_error(errno, "AF_PACKET socket");
  ifindex = int(if_nametoindex(dev.c_str()));
  if (!ifindex) return make_error(errno, "no interface " + dev + " in " + ns);
  sockaddr_ll sll{};
  sll.sll_family = AF_PACKET;
  sll.sll_protocol = htons(ETH_P_ALL);
  sll.sll_ifindex = ifindex;
  if (bind(fd.get(), reinterpret_cast<sockaddr*>(&sll), sizeof(sll)) != 0)
    return make_error(errno, "binding to " + dev);
  int rcvbuf = 32 << 20;
  setsockopt(fd.get(), SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof(rcvbuf));
  return fd;
}

int do_send(std::map<std::string, std::string>& o) {
  codec::Packet p;
  if (!parse_mac(o["--dst-mac"], p.eth.dst) || !parse_ip(o["--src"], p.ip.src) ||
      !parse_ip(o["--dst"], p.ip.dst) || p.ip.src.ver != p.ip.dst.ver) {
    std::cerr << "fabric_pkt send: need --dst-mac, --src and --dst (same IP version)\n";
    return 2;
  }
  p.eth.src = {0x02, 0, 0, 0, 0, 0x01};
  const std::string op = o.count("--opcode") ? o["--opcode"] : "write_only";
  if (!kOpcodes.count(op)) {
    std::cerr << "fabric_pkt send: unknown opcode " << op << "\n";
    return 2;
  }
  p.bth.opcode = kOpcodes.at(op);
  const bool data = codec::is_data_opcode(p.bth.opcode);
  const uint32_t count = uint32_t(std::stoul(o.count("--count") ? o["--count"] : "100"));
  const uint32_t payload =
      data ? uint32_t(std::stoul(o.count("--payload") ? o["--payload"] : "1024")) : 0;
  const uint64_t pps = o.count("--pps") ? std::stoull(o["--pps"]) : 0;
  uint32_t sport_lo = 0xc000, sport_hi = 0xc000;
  if (o.count("--sport")) sport_lo = sport_hi = uint32_t(std::stoul(o["--sport"]));
  if (o.count("--sport-range") &&
      std::sscanf(o["--sport-range"].c_str(), "%u-%u", &sport_lo, &sport_hi) != 2) {
    std::cerr << "fabric_pkt send: --sport-range A-B\n";
    return 2;
  }
  const std::string ecn = o.count("--ecn") ? o["--ecn"] : "ect0";
  p.ip.ecn = ecn == "not" ? MRC_ECN_NOT_ECT : ecn == "ect1" ? MRC_ECN_ECT1 : MRC_ECN_ECT0;
  p.ip.dscp = data ? MRC_DSCP_TRIMMABLE_DEFAULT : MRC_DSCP_CONTROL_DEFAULT;
  p.bth.ts = data && o.count("--ts");
  p.bth.dqpn = 0x123;
  std::vector<uint8_t> pl(payload);
  for (size_t i = 0; i < pl.size(); i++) pl[i] = uint8_t(i * 7 + 3);
  if (data) {
    p.reth.va = 0x10000;
    p.reth.rkey = 0x42;
    p.reth.dma_len = payload + 4096;
    p.payload = pl.data();
    p.payload_len = payload;
    p.imm = 0xabcd;
  }
  int ifindex = 0;
  auto fd = packet_socket(o["--netns"], o["--dev"], ifindex);
  if (!fd) {
    std::cerr << "fabric_pkt send: " << fd.error().message() << "\n";
    return 1;
  }
  std::vector<uint8_t> frame(codec::frame_size(p) + 64);
  const uint32_t psn0 = o.count("--psn") ? uint32_t(std::stoul(o["--psn"])) : 0;
  uint64_t t0 = now_ns();
  uint32_t sent = 0, dropped_local = 0;
  for (uint32_t i = 0; i < count; i++) {
    p.bth.psn = (psn0 + i) & MRC_PSN_MASK;
    p.udp.sport = uint16_t(sport_lo + (sport_hi > sport_lo ? i % (sport_hi - sport_lo + 1) : 0));
    p.ip.flow_label = p.udp.sport;
    p.ip.id = uint16_t(i);
    size_t n = codec::build(p, frame);
    if (!n) {
      std::cerr << "fabric_pkt send: codec refused the packet\n";
      return 1;
    }
    if (pps) {
      uint64_t due = t0 + uint64_t(i) * 1000000000ull / pps;
      while (now_ns() < due) {
        timespec ts{0, 20000};
        nanosleep(&ts, nullptr);
      }
    }
    // A tc drop on this port's egress shows up as ENOBUFS: the packet left
    // the socket and was dropped (counted as dropped_local, never resent).
    ssize_t w = ::send(fd->get(), frame.data(), n, 0);
    if (w == ssize_t(n)) {
      sent++;
    } else if (w < 0 && errno == ENOBUFS) {
      dropped_local++;
    } else {
      std::cerr << "fabric_pkt send: " << std::strerror(errno) << "\n";
      return 1;
    }
  }
  json j{{"sent", sent},
         {"dropped_local", dropped_local},
         {"count", count},
         {"frame_len", codec::frame_size(p)},
         {"secs", double(now_ns() - t0) / 1e9}};
  std::cout << j.dump() << "\n";
  return 0;
}

int do_recv(std::map<std::string, std::string>& o) {
  const uint64_t timeout_ms = std::stoull(o.count("--timeout-ms") ? o["--timeout-ms"] : "10000");
  const uint64_t idle_ms = std::stoull(o.count("--idle-ms") ? o["--idle-ms"] : "500");
  const uint64_t max = std::stoull(o.count("--max") ? o["--max"] : "1000000");
  int ifindex = 0;
  auto fd = packet_socket(o["--netns"], o["--dev"], ifindex);
  if (!fd) {
    std::cerr << "fabric_pkt recv: " << fd.error().message() << "\n";
    return 1;
  }
  if (o.count("--ready")) std::ofstream(o["--ready"]) << "ready\n";
  codec::CodecConfig cfg;
  std::map<std::string, uint64_t> errors, dscp, ecn;
  std::set<uint32_t> psns;
  uint64_t frames = 0, mrc = 0, ok = 0, trimmed = 0, trim_dscp_ok = 0, trim_len_ok = 0, dups = 0;
  std::vector<uint8_t> buf(70000);
  const uint64_t t_end = now_ns() + timeout_ms * 1000000ull;
  uint64_t last = 0;
  while (frames < max) {
    uint64_t now = now_ns();
    if (now >= t_end || (last && now - last >= idle_ms * 1000000ull)) break;
    pollfd pfd{fd->get(), POLLIN, 0};
    int wait = int(std::min<uint64_t>(50, (t_end - now) / 1000000ull + 1));
    if (poll(&pfd, 1, wait) <= 0) continue;
    sockaddr_ll from{};
    socklen_t fl = sizeof(from);
    ssize_t n = recvfrom(fd->get(), buf.data(), buf.size(), MSG_DONTWAIT,
                         reinterpret_cast<sockaddr*>(&from), &fl);
    if (n <= 0 || from.sll_pkttype == PACKET_OUTGOING) continue;
    frames++;
    last = now_ns();
    codec::Packet pk;
    auto err = codec::parse(std::span<const uint8_t>(buf.data(), size_t(n)), cfg, pk);
    if (err == codec::ParseError::kNotMrc) continue;
    mrc++;
    if (err != codec::ParseError::kOk) {
      errors[std::string(codec::to_string(err))]++;
      continue;
    }
    ok++;
    dscp[std::to_string(pk.ip.dscp)]++;
    ecn[pk.ip.ecn == MRC_ECN_CE ? "ce" : pk.ip.ecn == MRC_ECN_NOT_ECT ? "not_ect" : "ect"]++;
    if (pk.trim != codec::TrimKind::kNone) {
      trimmed++;
      if (pk.ip.dscp == cfg.dscp.trimmed) trim_dscp_ok++;
      const uint32_t hdr = pk.bth_off + 12 + codec::ext_header_len(pk.bth.opcode, pk.bth.ts);
      if (pk.frame_len == hdr) trim_len_ok++;
    }
    if (!psns.insert(pk.bth.psn).second) dups++;
  }
  json j{{"frames", frames},
         {"mrc", mrc},
         {"parsed_ok", ok},
         {"parse_errors", errors},
         {"trimmed", trimmed},
         {"trimmed_dscp_ok", trim_dscp_ok},
         {"trimmed_len_ok", trim_len_ok},
         {"dscp", dscp},
         {"ecn", ecn},
         {"unique_psn", psns.size()},
         {"dup_psn", dups}};
  std::cout << j.dump() << "\n";
  return 0;
}

}  // namespace
}  // namespace mrc::fabric

int main(int argc, char** argv) {
  if (argc < 2 || (std::string(argv[1]) != "send" && std::string(argv[1]) != "recv")) {
    std::cerr
        << "usage: fabric_pkt send|recv --netns NS --dev IF [options] (see the source header)\n";
    return 2;
  }
  std::map<std::string, std::string> o;
  for (int i = 2; i < argc; i++) {
    std::string k = argv[i];
    if (k == "--ts") {
      o[k] = "1";
    } else if (k.rfind("--", 0) == 0 && i + 1 < argc) {
      o[k] = argv[++i];
    } else {
      std::cerr << "fabric_pkt: bad argument " << k << "\n";
      return 2;
    }
  }
  try {
    return std::string(argv[1]) == "send" ? mrc::fabric::do_send(o) : mrc::fabric::do_recv(o);
  } catch (const std::exception& e) {  // std::stoul on a bad number
    std::cerr << "fabric_pkt: bad number (" << e.what() << ")\n";
    return 2;
  }
}
