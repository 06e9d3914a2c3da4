// Helpers of the memory-model tests: what /proc/self/maps says about an
// address, and patterns to check contents with.
#pragma once

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "svc/remap.hpp"

namespace mrc::testing {

struct MapsLine {
  uint64_t start = 0, end = 0, offset = 0;
  std::string perms, name;
  bool found = false;
};

// The /proc/self/maps line that holds `addr`.
inline MapsLine maps_line(const void* addr) {
  const uint64_t a = uint64_t(uintptr_t(addr));
  std::ifstream f("/proc/self/maps");
  std::string l;
  while (std::getline(f, l)) {
    unsigned long long s = 0, e = 0, off = 0, ino = 0;
    char perms[8] = {};
    int at = -1;
    if (std::sscanf(l.c_str(), "%llx-%llx %7s %llx %*s %llu %n", &s, &e, perms, &off, &ino, &at) <
        5)
      continue;
    if (a < s || a >= e) continue;
    MapsLine m;
    m.start = s;
    m.end = e;
    m.offset = off;
    m.perms = perms;
    m.name = at >= 0 && size_t(at) <= l.size() ? l.substr(size_t(at)) : "";
    m.found = true;
    return m;
  }
  return {};
}

// Every page of [p, p + n) is MAP_SHARED of one of libmrc's "mrc:" memfds.
inline bool all_pages_shared_mrc(const void* p, size_t n) {
  const size_t pg = svc::page_size();
  const uint64_t lo = uint64_t(uintptr_t(p)) & ~uint64_t(pg - 1);
  for (uint64_t a = lo; a < uint64_t(uintptr_t(p)) + n; a += pg) {
    MapsLine m = maps_line(reinterpret_cast<const void*>(uintptr_t(a)));
    if (!m.found || m.perms.size() < 4 || m.perms[3] != 's' || m.name.rfind("/memfd:mrc:", 0) != 0)
      return false;
  }
  return true;
}

inline bool private_page(const void* p) {
  MapsLine m = maps_line(p);
  return m.found && m.perms.size() >= 4 && m.perms[3] == 'p';
}

inline void fill(void* p, size_t n, uint32_t seed) {
  auto* b = static_cast<uint8_t*>(p);
  for (size_t i = 0; i < n; i++) b[i] = uint8_t(i * 131 + seed * 7 + (i >> 12));
}
inline bool check(const void* p, size_t n, uint32_t seed) {
  const auto* b = static_cast<const uint8_t*>(p);
  for (size_t i = 0; i < n; i++)
    if (b[i] != uint8_t(i * 131 + seed * 7 + (i >> 12))) return false;
  return true;
}

inline uint64_t inode_of(int fd) {
  struct stat st {};
  return ::fstat(fd, &st) == 0 ? uint64_t(st.st_ino) : 0;
}

// The pieces tile [addr, addr + len) rounded out to pages, in order.
inline bool tiles(const std::vector<svc::SharedPiece>& ps, const void* addr, size_t len) {
  const uint64_t pg = svc::page_size();
  const uint64_t a = uint64_t(uintptr_t(addr));
  uint64_t at = a & ~(pg - 1);
  const uint64_t hi = (a + len + pg - 1) & ~(pg - 1);
  for (const auto& p : ps) {
    if (p.addr != at || p.len == 0 || p.len % pg || p.fd_offset % pg || !p.fd) return false;
    at += p.len;
  }
  return at == hi;
}

// Reading through the piece's descriptor gives what the process sees at
// the piece's addresses: the pages are the memfd's.
inline bool fd_matches_memory(const std::vector<svc::SharedPiece>& ps) {
  // The scratch buffer is a private mapping of its own, never inside a piece.
  for (const auto& p : ps) {
    void* b = ::mmap(nullptr, p.len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (b == MAP_FAILED) return false;
    const bool ok = ::pread(p.fd.get(), b, p.len, off_t(p.fd_offset)) == ssize_t(p.len) &&
                    !std::memcmp(b, reinterpret_cast<const void*>(uintptr_t(p.addr)), p.len);
    ::munmap(b, p.len);
    if (!ok) return false;
  }
  return true;
}

}  // namespace mrc::testing
