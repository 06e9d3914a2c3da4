// Service side of memory option B (Documentation/service.md section 3):
// MappedRegion maps a client's sealed memfd pieces into one range of its
// own; the same pages are then visible at both addresses. Bad descriptors
// and bad layouts are refused with a sentence.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "svc/mapping.hpp"
#include "svc/remap.hpp"
#include "unit/svc/mem_test_util.hpp"

namespace mrc::testing {
namespace {

using svc::MappedRegion;
using svc::PieceRef;

std::vector<PieceRef> refs(const std::vector<svc::SharedPiece>& ps) {
  std::vector<PieceRef> out;
  for (const auto& p : ps) out.push_back(p.ref());
  return out;
}

// A memfd of `size` bytes with `seals` added.
UniqueFd memfd(size_t size, int seals) {
  UniqueFd fd(::memfd_create("mrc_test", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  EXPECT_TRUE(fd.valid());
  EXPECT_EQ(::ftruncate(fd.get(), off_t(size)), 0);
  if (seals) {
    EXPECT_EQ(::fcntl(fd.get(), F_ADD_SEALS, seals), 0);
  }
  return fd;
}
constexpr int kSeals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;

// A client buffer (partly overlapping an earlier registration, so two
// pieces) mapped a second time as the service would: writes at either
// address are seen at the other, at host + (va - iova).
TEST(MappedRegion, SamePagesBothWays) {
  const size_t pg = svc::page_size(), n = 64 * pg;
  // Fresh private memory, so the earlier registration makes exactly three
  // pieces: new area, the earlier area, new area.
  auto* buf = static_cast<uint8_t*>(
      ::mmap(nullptr, n + pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(buf, MAP_FAILED);
  fill(buf, n + pg, 71);
  ASSERT_TRUE(svc::share_range(buf + 5 * pg, 10 * pg).ok());
  uint8_t* const iova = buf + 1234;
  const size_t len = n;
  auto ps = svc::share_range(iova, len);
  ASSERT_TRUE(ps.ok()) << ps.error().message();
  ASSERT_EQ(ps->size(), 3u);
  const auto rs = refs(*ps);
  auto m = MappedRegion::map(rs, uint64_t(uintptr_t(iova)), len);
  ASSERT_TRUE(m.ok()) << m.error().message();
  auto* host = static_cast<uint8_t*>(m->host());
  ASSERT_NE(host, iova);
  EXPECT_EQ(m->iova(), uint64_t(uintptr_t(iova)));
  EXPECT_EQ(m->length(), len);
  ps->clear();  // the descriptors can go: the mapping holds the files
  EXPECT_EQ(0, std::memcmp(host, iova, len));
  // Client writes, service reads.
  for (size_t i = 0; i < len; i += 977) iova[i] = uint8_t(i ^ 0x3c);
  for (size_t i = 0; i < len; i += 977) ASSERT_EQ(host[i], uint8_t(i ^ 0x3c));
  // Service writes (a peer's WRITE), client reads.
  std::memset(host + 100, 0xa5, 3 * pg);
  for (size_t i = 100; i < 100 + 3 * pg; i++) ASSERT_EQ(iova[i], 0xa5);
  // The bytes before iova on its first page are mapped too (whole pages),
  // and unmapping the region leaves the client's memory alone.
  { MappedRegion gone = std::move(*m); }
  EXPECT_EQ(iova[100], 0xa5);
  ::munmap(buf, n + pg);
}

// fork without exec (service.md, "What remapping changes"): the child gets
// a private copy of every registered page as it was at fork, heap pages
// included, so its writes and its malloc stay its own; the parent's pages
// and the service's view of them are untouched.
TEST(MappedRegion, ForkedChildGetsPrivateCopy) {
  const size_t n = 2 << 20;
  auto* reg = static_cast<uint8_t*>(std::malloc(n));
  fill(reg, n, 81);
  auto ps = svc::share_range(reg, n);
  ASSERT_TRUE(ps.ok()) << ps.error().message();
  auto m = MappedRegion::map(refs(*ps), uint64_t(uintptr_t(reg)), n);
  ASSERT_TRUE(m.ok()) << m.error().message();
  auto* host = static_cast<uint8_t*>(m->host());
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (!check(reg, n, 81)) _exit(1);
    if (!private_page(reg) || !private_page(reg + n - 1)) _exit(2);
    std::memset(reg, 0x11, n);  // its own copy
    std::vector<void*> v;       // and its own heap
    for (int i = 0; i < 2000; i++) v.push_back(std::malloc(size_t(16 + i)));
    for (void* p : v) std::free(p);
    _exit(reg[4096] == 0x11 ? 0 : 3);
  }
  int st = 0;
  ASSERT_EQ(::waitpid(pid, &st, 0), pid);
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 0) << "1: contents, 2: still shared, 3: write lost";
  EXPECT_TRUE(check(reg, n, 81)) << "the child's writes are not the parent's";
  EXPECT_TRUE(all_pages_shared_mrc(reg, n)) << "the parent's pages are still registered";
  // The service's view is still the parent's memory.
  host[4096] = 0x22;
  EXPECT_EQ(reg[4096], 0x22);
  std::free(reg);
}

TEST(MappedRegion, RefusesUnsealedTooSmallAndNonMemfd) {
  const size_t pg = svc::page_size();
  const uint64_t iova = 0x7f0000000000ull;
  {
    UniqueFd fd = memfd(4 * pg, 0);
    PieceRef p{fd.get(), 0, iova, 4 * pg};
    auto m = MappedRegion::map({&p, 1}, iova, 4 * pg);
    ASSERT_FALSE(m.ok());
    EXPECT_EQ(m.error().code, EINVAL);
    EXPECT_NE(m.error().context.find("not sealed"), std::string::npos) << m.error().context;
  }
  {
    UniqueFd fd = memfd(4 * pg, F_SEAL_SHRINK | F_SEAL_GROW);  // no F_SEAL_SEAL
    PieceRef p{fd.get(), 0, iova, 4 * pg};
    auto m = MappedRegion::map({&p, 1}, iova, 4 * pg);
    ASSERT_FALSE(m.ok());
    EXPECT_NE(m.error().context.find("not sealed"), std::string::npos) << m.error().context;
  }
  {
    UniqueFd fd = memfd(2 * pg, kSeals);
    PieceRef p{fd.get(), pg, iova, 2 * pg};  // offset + len past the end
    auto m = MappedRegion::map({&p, 1}, iova, 2 * pg);
    ASSERT_FALSE(m.ok());
    EXPECT_EQ(m.error().code, EINVAL);
    EXPECT_NE(m.error().context.find("too small"), std::string::npos) << m.error().context;
  }
  {
    // Sealed against writes: the service could not place a peer's WRITE.
    UniqueFd fd = memfd(4 * pg, kSeals | F_SEAL_WRITE);
    PieceRef p{fd.get(), 0, iova, 4 * pg};
    auto m = MappedRegion::map({&p, 1}, iova, 4 * pg);
    ASSERT_FALSE(m.ok());
    EXPECT_EQ(m.error().code, EPERM);
    EXPECT_NE(m.error().context.find("mapping piece 0"), std::string::npos) << m.error().context;
  }
  {
    char path[] = "/tmp/mrc_svc_map_XXXXXX";
    UniqueFd fd(::mkstemp(path));
    ASSERT_TRUE(fd.valid());
    ::unlink(path);
    ASSERT_EQ(::ftruncate(fd.get(), off_t(4 * pg)), 0);
    PieceRef p{fd.get(), 0, iova, 4 * pg};
    auto m = MappedRegion::map({&p, 1}, iova, 4 * pg);
    ASSERT_FALSE(m.ok());
    EXPECT_EQ(m.error().code, EINVAL);
    EXPECT_NE(m.error().context.find("not a memfd"), std::string::npos) << m.error().context;
  }
  {
    int pfd[2];
    ASSERT_EQ(::pipe(pfd), 0);
    UniqueFd r(pfd[0]), w(pfd[1]);
    PieceRef p{r.get(), 0, iova, pg};
    auto m = MappedRegion::map({&p, 1}, iova, pg);
    ASSERT_FALSE(m.ok());
    EXPECT_NE(m.error().context.find("not a memfd"), std::string::npos) << m.error().context;
    PieceRef closed{-1, 0, iova, pg};
    EXPECT_FALSE(MappedRegion::map({&closed, 1}, iova, pg).ok());
  }
}

// The pieces must tile the page-rounded region exactly, page-aligned.
TEST(MappedRegion, RefusesBadLayouts) {
  const size_t pg = svc::page_size();
  UniqueFd fd = memfd(16 * pg, kSeals);
  const int f = fd.get();
  const uint64_t iova = 0x7f0000000000ull + 100;  // rounds to [..000, ..000 + 4 pages)
  const uint64_t lo = iova - 100;
  struct Case {
    std::vector<PieceRef> ps;
    const char* why;
  } cases[] = {
      {{{f, 0, lo, 2 * pg}}, "cover"},                                   // short
      {{{f, 0, lo, 2 * pg}, {f, 0, lo + 3 * pg, pg}}, "continues"},      // a hole
      {{{f, 0, lo, 3 * pg}, {f, 0, lo + 2 * pg, 2 * pg}}, "continues"},  // overlap
      {{{f, 0, lo, 5 * pg}}, "past"},                                    // too long
      {{{f, 0, lo + 1, 4 * pg}}, "page-aligned"},
      {{{f, 1, lo, 4 * pg}}, "page-aligned"},
      {{{f, 0, lo, 0}, {f, 0, lo, 4 * pg}}, "empty"},
      {{}, "cover"},
  };
  for (const Case& c : cases) {
    auto m = MappedRegion::map(c.ps, iova, 4 * pg - 100);
    ASSERT_FALSE(m.ok()) << c.why;
    EXPECT_EQ(m.error().code, EINVAL);
    EXPECT_NE(m.error().context.find(c.why), std::string::npos) << m.error().context;
  }
  std::vector<PieceRef> many;
  for (size_t i = 0; i < svc::kMaxPieces + 1; i++) many.push_back({f, 0, lo + i * pg, pg});
  auto m = MappedRegion::map(many, lo, many.size() * pg);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.error().code, E2BIG);
  // The good layout of the same fd maps.
  PieceRef good[] = {{f, 4 * pg, lo, 3 * pg}, {f, 0, lo + 3 * pg, pg}};
  auto ok = MappedRegion::map(good, iova, 4 * pg - 100);
  ASSERT_TRUE(ok.ok()) << ok.error().message();
  EXPECT_EQ(ok->mapped_bytes(), 4 * pg);
  // Bytes land at the pieces' offsets: host byte at iova + k is fd byte
  // 4 pages + 100 + k for the first piece.
  static_cast<uint8_t*>(ok->host())[7] = 0x77;
  uint8_t b = 0;
  ASSERT_EQ(::pread(f, &b, 1, off_t(4 * pg + 100 + 7)), 1);
  EXPECT_EQ(b, 0x77);
  // Empty regions map to nothing.
  auto empty = MappedRegion::map({}, iova, 0);
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->host(), nullptr);
}

}  // namespace
}  // namespace mrc::testing
