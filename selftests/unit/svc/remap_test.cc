// Client side of memory option B (Documentation/service.md section 3):
// share_range moves the pages under ordinary application buffers onto sealed
// "mrc:" memfds at the same addresses, contents and neighbours preserved,
// and refuses memory it cannot share with a reason.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <malloc.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <thread>
#include <vector>

#include "svc/remap.hpp"
#include "unit/svc/mem_test_util.hpp"

namespace mrc::testing {
namespace {

using svc::SharedPiece;

// A fixed mmap threshold from the start (glibc raises a dynamic one when
// mmapped chunks are freed), so every malloc of 128 KiB or more in this
// binary is its own mmapped chunk, whatever order the tests run in.
[[maybe_unused]] const int kFixedMmapThreshold = ::mallopt(M_MMAP_THRESHOLD, 128 * 1024);

// Small heap objects side by side: the registered one and both neighbours
// keep their bytes, its pages become MAP_SHARED of an "mrc:" memfd, and
// later writes go to the memfd (the service's view).
TEST(ShareRange, SmallHeapObjectsAndNeighbours) {
  std::vector<void*> objs;
  for (int i = 0; i < 64; i++) {
    objs.push_back(std::malloc(200));
    fill(objs.back(), 200, uint32_t(i));
  }
  void* target = objs[32];
  auto r = svc::share_range(static_cast<uint8_t*>(target) + 10, 150);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_TRUE(tiles(*r, static_cast<uint8_t*>(target) + 10, 150));
  EXPECT_TRUE(all_pages_shared_mrc(target, 200));
  for (int i = 0; i < 64; i++) EXPECT_TRUE(check(objs[size_t(i)], 200, uint32_t(i))) << i;
  // Writes after the remap are in the memfd.
  std::memset(target, 0x5a, 200);
  EXPECT_TRUE(fd_matches_memory(*r));
  for (int i = 0; i < 64; i++)
    if (i != 32) {
      EXPECT_TRUE(check(objs[size_t(i)], 200, uint32_t(i))) << i;
    }
  // The heap keeps working around the remapped pages.
  for (void* p : objs) std::free(p);
  std::vector<void*> more;
  for (int i = 0; i < 1000; i++) {
    more.push_back(std::malloc(size_t(64 + i % 500)));
    fill(more.back(), size_t(64 + i % 500), uint32_t(i));
  }
  for (int i = 0; i < 1000; i++)
    EXPECT_TRUE(check(more[size_t(i)], size_t(64 + i % 500), uint32_t(i)));
  for (void* p : more) std::free(p);
}

// A large malloc is its own mmapped chunk.
TEST(ShareRange, LargeMmappedChunk) {
  // A fixed threshold: glibc raises a dynamic one when mmapped chunks are freed.
  ASSERT_EQ(::mallopt(M_MMAP_THRESHOLD, 128 * 1024), 1);
  const size_t n = 8 << 20;
  auto* p = static_cast<uint8_t*>(std::malloc(n));
  ASSERT_NE(p, nullptr);
  fill(p, n, 7);
  EXPECT_TRUE(private_page(p));
  auto r = svc::share_range(p, n);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_TRUE(tiles(*r, p, n));
  EXPECT_EQ(r->size(), 1u) << "one contiguous chunk: one piece";
  EXPECT_TRUE(all_pages_shared_mrc(p, n));
  EXPECT_TRUE(check(p, n, 7));
  EXPECT_TRUE(fd_matches_memory(*r));
  p[12345] ^= 0xff;
  EXPECT_TRUE(fd_matches_memory(*r));
  std::free(p);
}

TEST(ShareRange, CallocStaysZero) {
  const size_t n = 3 << 20;
  auto* p = static_cast<uint8_t*>(std::calloc(n, 1));
  ASSERT_NE(p, nullptr);
  auto r = svc::share_range(p, n);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_TRUE(all_pages_shared_mrc(p, n));
  // Never-touched pages were not copied: the memfd holds at most the page
  // with malloc's chunk header.
  for (const auto& piece : *r) {
    struct stat st {};
    ASSERT_EQ(::fstat(piece.fd.get(), &st), 0);
    EXPECT_LE(uint64_t(st.st_blocks) * 512, svc::page_size()) << "untouched pages cost no memory";
  }
  for (size_t i = 0; i < n; i++) ASSERT_EQ(p[i], 0) << i;
  fill(p, n, 3);
  EXPECT_TRUE(fd_matches_memory(*r));
  std::free(p);
}

TEST(ShareRange, VectorStorage) {
  std::vector<uint32_t> v(300000);
  std::iota(v.begin(), v.end(), 17u);
  auto r = svc::share_range(v.data(), v.size() * sizeof(uint32_t));
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_TRUE(all_pages_shared_mrc(v.data(), v.size() * sizeof(uint32_t)));
  for (size_t i = 0; i < v.size(); i++) ASSERT_EQ(v[i], uint32_t(i + 17));
  v[1000] = 42;
  EXPECT_TRUE(fd_matches_memory(*r));
  // Growing moves the storage to fresh memory; the contents come along.
  v.resize(2000000, 9);
  EXPECT_EQ(v[1000], 42u);
  EXPECT_EQ(v[299999], 299999u + 17);
  EXPECT_EQ(v[1999999], 9u);
}

// A registration that partly overlaps an earlier one reuses the earlier
// area's pages and adds a new area only for the rest.
TEST(ShareRange, PartialOverlapReusesEarlierArea) {
  const size_t pg = svc::page_size(), n = 256 * pg;
  auto* p = static_cast<uint8_t*>(
      ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(p, MAP_FAILED);
  fill(p, n, 11);
  auto a = svc::share_range(p + 10, 128 * pg - 20);
  ASSERT_TRUE(a.ok()) << a.error().message();
  ASSERT_EQ(a->size(), 1u);
  const uint64_t ino_a = inode_of((*a)[0].fd.get());
  const size_t areas = svc::shared_area_count();
  auto b = svc::share_range(p + 64 * pg + 5, 192 * pg - 5);
  ASSERT_TRUE(b.ok()) << b.error().message();
  EXPECT_TRUE(tiles(*b, p + 64 * pg + 5, 192 * pg - 5));
  ASSERT_EQ(b->size(), 2u);
  EXPECT_EQ(inode_of((*b)[0].fd.get()), ino_a) << "the overlap is the earlier area";
  EXPECT_TRUE((*a)[0].created);
  EXPECT_EQ((*b)[0].area, (*a)[0].area);
  EXPECT_FALSE((*b)[0].created);
  EXPECT_TRUE((*b)[1].created);
  EXPECT_NE((*b)[1].area, (*a)[0].area);
  EXPECT_EQ((*b)[0].fd_offset, 64 * pg);
  EXPECT_EQ((*b)[0].len, 64 * pg);
  EXPECT_NE(inode_of((*b)[1].fd.get()), ino_a);
  EXPECT_EQ((*b)[1].fd_offset, 0u);
  EXPECT_EQ(svc::shared_area_count(), areas + 1);
  EXPECT_TRUE(check(p, n, 11));
  EXPECT_TRUE(all_pages_shared_mrc(p, n));
  fill(p, n, 12);
  EXPECT_TRUE(fd_matches_memory(*a));
  EXPECT_TRUE(fd_matches_memory(*b));
  ::munmap(p, n);
}

// The same range twice: the same pages, no new area, no copy.
TEST(ShareRange, SameRangeTwice) {
  const size_t n = 1 << 20;
  auto* p = static_cast<uint8_t*>(std::malloc(n));
  fill(p, n, 21);
  auto a = svc::share_range(p, n);
  ASSERT_TRUE(a.ok()) << a.error().message();
  const size_t areas = svc::shared_area_count();
  auto b = svc::share_range(p, n);
  ASSERT_TRUE(b.ok()) << b.error().message();
  EXPECT_EQ(svc::shared_area_count(), areas);
  ASSERT_EQ(a->size(), b->size());
  for (size_t i = 0; i < a->size(); i++) {
    EXPECT_EQ(inode_of((*a)[i].fd.get()), inode_of((*b)[i].fd.get()));
    EXPECT_EQ((*a)[i].fd_offset, (*b)[i].fd_offset);
    EXPECT_EQ((*a)[i].addr, (*b)[i].addr);
    EXPECT_EQ((*a)[i].len, (*b)[i].len);
    EXPECT_EQ((*a)[i].area, (*b)[i].area);
    EXPECT_FALSE((*b)[i].created) << "nothing new the second time";
  }
  EXPECT_TRUE(check(p, n, 21));
  std::free(p);
}

// free() unmaps a registered mmapped chunk: its area is released; the next
// malloc of that size (often at the same addresses) is ordinary private
// memory again and shares like any other.
TEST(ShareRange, FreeThenReuseSameAddresses) {
  ASSERT_EQ(::mallopt(M_MMAP_THRESHOLD, 128 * 1024), 1);  // 4 MiB: an mmapped chunk
  const size_t n = 4 << 20;
  auto* p = static_cast<uint8_t*>(std::malloc(n));
  fill(p, n, 31);
  auto a = svc::share_range(p, n);
  ASSERT_TRUE(a.ok()) << a.error().message();
  const uint64_t ino = inode_of((*a)[0].fd.get());
  a->clear();  // the caller's descriptors, as after passing them to the service
  const size_t areas = svc::shared_area_count();
  std::free(p);
  auto dropped = svc::release_unmapped_areas();
  ASSERT_TRUE(dropped.ok());
  EXPECT_GE(*dropped, 1u);
  EXPECT_EQ(svc::shared_area_count(), areas - *dropped);
  auto* q = static_cast<uint8_t*>(std::malloc(n));
  fill(q, n, 32);
  auto b = svc::share_range(q, n);
  ASSERT_TRUE(b.ok()) << b.error().message();
  EXPECT_TRUE(check(q, n, 32));
  EXPECT_TRUE(all_pages_shared_mrc(q, n));
  for (const auto& piece : *b) EXPECT_NE(inode_of(piece.fd.get()), ino) << "a fresh area";
  std::free(q);
  // Small heap objects: freed and reused in the same (already shared) pages.
  auto* s = static_cast<uint8_t*>(std::malloc(3000));
  fill(s, 3000, 33);
  ASSERT_TRUE(svc::share_range(s, 3000).ok());
  std::free(s);
  auto* t = static_cast<uint8_t*>(std::malloc(3000));
  fill(t, 3000, 34);
  const size_t before = svc::shared_area_count();
  auto c = svc::share_range(t, 3000);
  ASSERT_TRUE(c.ok()) << c.error().message();
  if (t == s) {
    EXPECT_EQ(svc::shared_area_count(), before) << "the same pages, reused";
  }
  EXPECT_TRUE(check(t, 3000, 34));
  EXPECT_TRUE(fd_matches_memory(*c));
  std::free(t);
}

// MADV_DONTNEED does not zero a shared mapping (service.md, "What remapping
// changes"). glibc's calloc trusts only memory it knows is fresh (new mmapped
// chunks, top memory past the main heap's sbrk or a thread heap's mprotect
// high-water mark), so registered heap memory that was freed, trimmed and
// handed out again by calloc is cleared, in the main arena and in a
// thread's arena.
void calloc_after_trim(int* nonzero) {
  std::vector<uint8_t*> v;
  for (int i = 0; i < 40; i++) {
    v.push_back(static_cast<uint8_t*>(std::malloc(60000)));
    std::memset(v.back(), 0xff, 60000);
  }
  uint8_t *lo = v[0], *hi = v[0] + 60000;
  for (uint8_t* p : v) {
    lo = std::min(lo, p);
    hi = std::max(hi, p + 60000);
  }
  auto r = svc::share_range(lo, size_t(hi - lo));
  if (!r.ok() || !all_pages_shared_mrc(lo, size_t(hi - lo))) *nonzero = -1;
  for (uint8_t* p : v) std::free(p);
  ::malloc_trim(0);
  v.clear();
  for (int i = 0; i < 40; i++) {
    v.push_back(static_cast<uint8_t*>(std::calloc(60000, 1)));
    for (size_t k = 0; k < 60000; k++)
      if (v.back()[k]) {
        (*nonzero)++;
        break;
      }
  }
  for (uint8_t* p : v) std::free(p);
}

TEST(ShareRange, CallocAfterTrimIsZeroInEveryArena) {
  int main_arena = 0, thread_arena = 0;
  calloc_after_trim(&main_arena);
  std::thread t([&] { calloc_after_trim(&thread_arena); });
  t.join();
  EXPECT_EQ(main_arena, 0) << "-1: sharing failed";
  EXPECT_EQ(thread_arena, 0) << "-1: sharing failed";
}

// A thread that keeps writing into the range (its interior, and a
// neighbour on an edge page) while it is registered loses no write: with
// the userfaultfd fence it waits during the copy and the mmap.
TEST(ShareRange, ConcurrentWriterLosesNothingWithTheFence) {
  if (!svc::write_fence_supported())
    GTEST_SKIP() << "no userfaultfd write protection of unpopulated pages (Linux 6.4) here";
  const size_t pg = svc::page_size(), n = 64 << 20;
  auto* p = static_cast<uint8_t*>(
      ::mmap(nullptr, n + pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(p, MAP_FAILED);
  fill(p, n, 45);  // every page populated: the copy takes a while
  auto* interior = reinterpret_cast<volatile uint64_t*>(p + n / 2 + 64);
  auto* edge = reinterpret_cast<volatile uint64_t*>(p + n + 8);  // next to the range's last page
  *interior = 0;
  *edge = 0;
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> progress{0};
  uint64_t count = 0;  // the writer's own count, read after join
  std::thread w([&] {
    uint64_t c = 0;
    while (!stop.load(std::memory_order_relaxed)) {
      *interior = *interior + 1;
      *edge = *edge + 1;
      progress.store(++c, std::memory_order_relaxed);
    }
    count = c;
  });
  while (progress.load() < 1000) std::this_thread::yield();
  auto r = svc::share_range(p + 100, n + 16 - 100);  // the last page holds `edge`
  // Let the writer run on the new mapping too, then stop it.
  const uint64_t at = progress.load();
  while (progress.load() < at + 1000) std::this_thread::yield();
  stop = true;
  w.join();
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_TRUE(all_pages_shared_mrc(p, n + 16));
  EXPECT_EQ(*interior, count) << "writes into the interior lost";
  EXPECT_EQ(*edge, count) << "writes into the edge page lost";
  EXPECT_TRUE(fd_matches_memory(*r));
  ::munmap(p, n + pg);
}

// A thread that touches fresh pages one after another while the range is
// registered: pages it populates before, during and after the pagemap reads
// and the fence all keep their bytes (untouched pages are skipped without
// being read, so this is the race that matters for them).
TEST(ShareRange, WriterPopulatingUntouchedPagesLosesNothing) {
  if (!svc::write_fence_supported())
    GTEST_SKIP() << "no userfaultfd write protection of unpopulated pages (Linux 6.4) here";
  const size_t pg = svc::page_size(), n = 64 << 20, pages = n / pg;
  auto* p = static_cast<uint8_t*>(
      ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(p, MAP_FAILED);
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> progress{0};
  uint64_t written = 0;
  std::thread w([&] {
    uint64_t k = 0;
    for (; k < pages && !stop.load(std::memory_order_relaxed); k++) {
      *reinterpret_cast<volatile uint64_t*>(p + k * pg + 8) = k + 1;
      progress.store(k + 1, std::memory_order_relaxed);
    }
    written = k;
  });
  while (progress.load() < 100) std::this_thread::yield();
  auto r = svc::share_range(p, n);
  const uint64_t at = progress.load();
  while (progress.load() < std::min<uint64_t>(at + 100, pages)) std::this_thread::yield();
  stop = true;
  w.join();
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_TRUE(all_pages_shared_mrc(p, n));
  uint64_t bad = 0;
  for (uint64_t k = 0; k < pages; k++) {
    const uint64_t v = *reinterpret_cast<const uint64_t*>(p + k * pg + 8);
    if (v != (k < written ? k + 1 : 0)) bad++;
  }
  EXPECT_EQ(bad, 0u) << "of " << written << " pages written";
  ::munmap(p, n);
}

// Protection survives: a read-only private mapping stays read-only.
TEST(ShareRange, ProtectionKept) {
  const size_t pg = svc::page_size();
  auto* p = static_cast<uint8_t*>(
      ::mmap(nullptr, 4 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(p, MAP_FAILED);
  fill(p, 4 * pg, 41);
  ASSERT_EQ(::mprotect(p + 2 * pg, 2 * pg, PROT_READ), 0);
  auto r = svc::share_range(p, 4 * pg);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->size(), 1u) << "one area over both protections";
  EXPECT_EQ(maps_line(p).perms, "rw-s");
  EXPECT_EQ(maps_line(p + 3 * pg).perms, "r--s");
  EXPECT_TRUE(check(p, 4 * pg, 41));
  ::munmap(p, 4 * pg);
}

// Refusals name the mapping and change nothing.
TEST(ShareRange, RefusesSharedAnonymous) {
  const size_t pg = svc::page_size();
  void* p = ::mmap(nullptr, 4 * pg, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(p, MAP_FAILED);
  auto r = svc::share_range(p, 4 * pg);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, EOPNOTSUPP);
  EXPECT_NE(r.error().context.find("MAP_SHARED anonymous"), std::string::npos) << r.error().context;
  ::munmap(p, 4 * pg);
}

TEST(ShareRange, RefusesHugePages) {
  const size_t n = 2 << 20;
  void* p =
      ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
  if (p == MAP_FAILED) GTEST_SKIP() << "no huge pages reserved (vm.nr_hugepages)";
  auto r = svc::share_range(p, 4096);
  ::munmap(p, n);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, EOPNOTSUPP);
  EXPECT_NE(r.error().context.find("MAP_HUGETLB"), std::string::npos) << r.error().context;
}

TEST(ShareRange, RefusesFileMappingsAndChangesNothing) {
  const size_t pg = svc::page_size();
  char path[] = "/tmp/mrc_svc_remap_XXXXXX";
  const int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, off_t(2 * pg)), 0);
  // Private anonymous memory right below a shared file mapping: the
  // refusal comes before the anonymous part is touched.
  auto* base = static_cast<uint8_t*>(
      ::mmap(nullptr, 4 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(base, MAP_FAILED);
  fill(base, 2 * pg, 51);
  for (int shared = 1; shared >= 0; shared--) {
    void* f = ::mmap(base + 2 * pg, 2 * pg, PROT_READ | PROT_WRITE,
                     (shared ? MAP_SHARED : MAP_PRIVATE) | MAP_FIXED, fd, 0);
    ASSERT_NE(f, MAP_FAILED);
    auto r = svc::share_range(base, 4 * pg);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, EOPNOTSUPP);
    EXPECT_NE(r.error().context.find(shared ? "shared file mapping" : "private file mapping"),
              std::string::npos)
        << r.error().context;
    EXPECT_NE(r.error().context.find(path), std::string::npos) << r.error().context;
    EXPECT_TRUE(private_page(base)) << "nothing remapped";
    EXPECT_TRUE(check(base, 2 * pg, 51));
  }
  ::munmap(base, 4 * pg);
  ::close(fd);
  ::unlink(path);
}

TEST(ShareRange, RefusesStack) {
  volatile uint8_t local[8192];
  for (size_t i = 0; i < sizeof local; i++) local[i] = uint8_t(i);
  auto r = svc::share_range(const_cast<uint8_t*>(local), sizeof local);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, EOPNOTSUPP);
  EXPECT_NE(r.error().context.find("stack"), std::string::npos) << r.error().context;
  EXPECT_TRUE(private_page(const_cast<uint8_t*>(local)));
}

TEST(ShareRange, RefusesHolesAndUnreadablePages) {
  const size_t pg = svc::page_size();
  auto* p = static_cast<uint8_t*>(
      ::mmap(nullptr, 3 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(p, MAP_FAILED);
  ASSERT_EQ(::mprotect(p + pg, pg, PROT_NONE), 0);
  auto r = svc::share_range(p, 3 * pg);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, EACCES);
  ASSERT_EQ(::munmap(p + pg, pg), 0);
  auto h = svc::share_range(p, 3 * pg);
  ASSERT_FALSE(h.ok());
  EXPECT_EQ(h.error().code, EFAULT);
  EXPECT_TRUE(private_page(p));
  ::munmap(p, 3 * pg);
  EXPECT_TRUE(svc::share_range(p, 0).ok()) << "an empty range has no pieces";
}

// alloc_shared memory is already an area: sharing it creates nothing.
TEST(AllocShared, SharesWithoutCopy) {
  const size_t n = 5 * svc::page_size() + 100;
  ASSERT_TRUE(svc::release_unmapped_areas().ok());
  auto p = svc::alloc_shared(n);
  ASSERT_TRUE(p.ok()) << p.error().message();
  const size_t areas = svc::shared_area_count();
  EXPECT_TRUE(all_pages_shared_mrc(*p, n));
  for (size_t i = 0; i < n; i++) ASSERT_EQ(static_cast<uint8_t*>(*p)[i], 0);
  fill(*p, n, 61);
  auto r = svc::share_range(*p, n);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(svc::shared_area_count(), areas);
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0].fd_offset, 0u);
  EXPECT_TRUE(fd_matches_memory(*r));
  r->clear();
  ASSERT_TRUE(svc::free_shared(*p, n).ok());
  EXPECT_EQ(svc::shared_area_count(), areas - 1);
}

}  // namespace
}  // namespace mrc::testing
