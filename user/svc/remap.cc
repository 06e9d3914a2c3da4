// Memory option B, client side: see remap.hpp and Documentation/service.md
// section 3. Everything here runs at registration time, under one mutex.
#include "svc/remap.hpp"

#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <pthread.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>

#include "util/mmap_area.hpp"

namespace mrc::svc {
namespace {

std::string hex(uint64_t v) {
  char b[24];
  std::snprintf(b, sizeof b, "0x%llx", static_cast<unsigned long long>(v));
  return b;
}

// One line of /proc/self/maps.
struct MapLine {
  uint64_t start = 0, end = 0, offset = 0, ino = 0;
  bool r = false, w = false, x = false, shared = false;
  std::string name;
  int prot() const { return (r ? PROT_READ : 0) | (w ? PROT_WRITE : 0) | (x ? PROT_EXEC : 0); }
  std::string range() const { return "[" + hex(start) + ", " + hex(end) + ")"; }
};

Result<std::string> read_all(const char* path) {
  UniqueFd fd(::open(path, O_RDONLY | O_CLOEXEC));
  if (!fd) return Error(errno, std::string("opening ") + path);
  std::string out;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Error(errno, std::string("reading ") + path);
    if (n == 0) break;
    out.append(buf, size_t(n));
  }
  return out;
}

// "start-end perms offset dev inode   name"
bool parse_line(const std::string& l, MapLine* m) {
  unsigned long long s = 0, e = 0, off = 0, ino = 0;
  char perms[8] = {};
  int name_at = -1;
  if (std::sscanf(l.c_str(), "%llx-%llx %7s %llx %*s %llu %n", &s, &e, perms, &off, &ino,
                  &name_at) < 5)
    return false;
  if (std::strlen(perms) < 4) return false;
  m->start = s;
  m->end = e;
  m->offset = off;
  m->ino = ino;
  m->r = perms[0] == 'r';
  m->w = perms[1] == 'w';
  m->x = perms[2] == 'x';
  m->shared = perms[3] == 's';
  m->name = name_at >= 0 && size_t(name_at) <= l.size() ? l.substr(size_t(name_at)) : "";
  return true;
}

Result<std::vector<MapLine>> read_maps() {
  auto text = read_all("/proc/self/maps");
  if (!text) return std::move(text).error();
  std::vector<MapLine> out;
  size_t at = 0;
  while (at < text->size()) {
    size_t nl = text->find('\n', at);
    if (nl == std::string::npos) nl = text->size();
    MapLine m;
    if (parse_line(text->substr(at, nl - at), &m)) out.push_back(std::move(m));
    at = nl + 1;
  }
  return out;
}

// One memfd this process created ("mrc:<n>"), kept open so later
// registrations over its pages can pass it again.
struct Area {
  UniqueFd fd;
  uint64_t ino = 0;
};

struct Registry {
  std::mutex mu;
  std::map<uint64_t, Area> areas;  // by n
  uint64_t next = 1;
};

Registry& registry() {
  static Registry r;
  return r;
}

// The area a maps line shows, if it is one of ours (name and inode match).
const Area* area_of(const Registry& reg, const MapLine& m, uint64_t* n_out) {
  static const std::string prefix = std::string("/memfd:") + kAreaNamePrefix;
  if (!m.shared || m.name.compare(0, prefix.size(), prefix) != 0) return nullptr;
  char* end = nullptr;
  const unsigned long long n = std::strtoull(m.name.c_str() + prefix.size(), &end, 10);
  if (end == m.name.c_str() + prefix.size() || (*end != '\0' && *end != ' ')) return nullptr;
  auto it = reg.areas.find(n);
  if (it == reg.areas.end() || it->second.ino != m.ino) return nullptr;
  *n_out = n;
  return &it->second;
}

bool private_anonymous(const MapLine& m) {
  if (m.shared || m.ino != 0) return false;
  return m.name.empty() || m.name == "[heap]" || m.name.rfind("[anon:", 0) == 0;
}

// Why a mapping that is neither ours nor private anonymous cannot be shared.
std::string refusal(const MapLine& m) {
  std::string what;
  if (m.name == "[stack]" || m.name.rfind("[stack:", 0) == 0)
    what = "the stack";
  else if (m.shared && (m.name.rfind("/dev/zero", 0) == 0 || m.name.rfind("[anon_shmem", 0) == 0))
    what = "MAP_SHARED anonymous memory (" + m.name + ")";
  else if (m.name.rfind("/anon_hugepage", 0) == 0)
    what = "huge-page memory (MAP_HUGETLB)";
  else if (m.name.rfind("/dev/", 0) == 0)
    what = "device memory (" + m.name + ")";
  else if (m.name.rfind("/SYSV", 0) == 0)
    what = "System V shared memory (" + m.name + ")";
  else if (m.shared)
    what = "a shared file mapping of " + (m.name.empty() ? std::string("an unnamed file") : m.name);
  else if (!m.name.empty() && m.name[0] == '[')
    what = "the special mapping " + m.name;
  else
    what =
        "a private file mapping of " + (m.name.empty() ? std::string("an unnamed file") : m.name);
  return "the mapping " + m.range() + " is " + what +
         "; service mode shares only private anonymous memory (heap, malloc, "
         "MAP_PRIVATE|MAP_ANONYMOUS) and mrc_alloc_buf memory: use exclusive mode "
         "(MRC_MODE=exclusive) or mrc_alloc_buf for it";
}

// The calling thread's stack, [lo, hi), or {0, 0}.
std::pair<uint64_t, uint64_t> own_stack() {
  pthread_attr_t a;
  if (::pthread_getattr_np(::pthread_self(), &a) != 0) return {0, 0};
  void* addr = nullptr;
  size_t size = 0;
  const int rc = ::pthread_attr_getstack(&a, &addr, &size);
  ::pthread_attr_destroy(&a);
  if (rc != 0) return {0, 0};
  return {uint64_t(uintptr_t(addr)), uint64_t(uintptr_t(addr)) + size};
}

bool all_zero(const uint8_t* p, size_t n);
void copy_run(uint8_t* dst, const uint8_t* src, uint64_t len, size_t pg);

// fork() without exec (service.md, "What remapping changes"). Left alone,
// a child would share every remapped page with its parent, heap pages
// included, and the two processes' allocators would corrupt each other.
// Instead the child replaces each of its "mrc:" mappings with a private copy
// before fork() returns in it, and the forking thread of the parent waits
// for that, so the copy is the parent's memory at the time of fork. The
// child's side allocates nothing until its heap pages are private again.
struct ForkState {
  std::vector<MapLine> lines;  // the "mrc:" mappings at the time of fork
  int pipe_r = -1, pipe_w = -1;
  bool active = false;
};

ForkState& fork_state() {
  static ForkState f;
  return f;
}

void fork_prepare() {
  Registry& reg = registry();
  reg.mu.lock();  // no registration is half done at fork; both sides unlock
  ForkState& f = fork_state();
  f.lines.clear();
  f.active = false;
  if (reg.areas.empty()) return;
  auto maps = read_maps();
  if (!maps) return;  // the child then shares the pages (documented)
  for (const MapLine& m : *maps) {
    uint64_t n = 0;
    if (area_of(reg, m, &n)) f.lines.push_back(m);
  }
  int p[2];
  if (f.lines.empty() || ::pipe2(p, O_CLOEXEC) != 0) return;
  f.pipe_r = p[0];
  f.pipe_w = p[1];
  f.active = true;
}

void fork_parent() {
  ForkState& f = fork_state();
  if (f.active) {
    ::close(f.pipe_w);
    char b = 0;
    while (::read(f.pipe_r, &b, 1) < 0 && errno == EINTR) {
    }  // one byte, or EOF if the child died first
    ::close(f.pipe_r);
    f.active = false;
  }
  registry().mu.unlock();
}

// Moves private anonymous pages holding the mapping's contents over it.
void privatize(const MapLine& m) {
  const size_t len = size_t(m.end - m.start);
  void* tmp = ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (tmp == MAP_FAILED) return;  // the child keeps sharing this mapping
  auto* at = reinterpret_cast<uint8_t*>(uintptr_t(m.start));
  if (!m.r) ::mprotect(at, len, PROT_READ);
  copy_run(static_cast<uint8_t*>(tmp), at, len, page_size());
  ::mprotect(tmp, len, m.prot());
  if (::mremap(tmp, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, at) == MAP_FAILED) ::munmap(tmp, len);
}

void fork_child() {
  ForkState& f = fork_state();
  if (f.active) {
    ::close(f.pipe_r);
    for (const MapLine& m : f.lines) privatize(m);
    const char b = 1;
    if (::write(f.pipe_w, &b, 1) < 0) {
    }  // the parent also wakes on EOF
    ::close(f.pipe_w);
    f.active = false;
  }
  registry().mu.unlock();
}

// A new sealed memfd "mrc:<n>" of `size` bytes, entered in the registry.
Result<uint64_t> new_area(Registry& reg, uint64_t size) {
  static std::once_flag once;
  std::call_once(once, [] { ::pthread_atfork(fork_prepare, fork_parent, fork_child); });
  const uint64_t n = reg.next++;
  const std::string name = kAreaNamePrefix + std::to_string(n);
  UniqueFd fd(::memfd_create(name.c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!fd) return Error(errno, "memfd_create " + name);
  if (::ftruncate(fd.get(), off_t(size)) != 0)
    return Error(errno, "sizing memfd " + name + " to " + std::to_string(size) + " bytes");
  if (::fcntl(fd.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0)
    return Error(errno, "sealing memfd " + name);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return Error(errno, "fstat of memfd " + name);
  reg.areas[n] = Area{std::move(fd), uint64_t(st.st_ino)};
  return n;
}

bool all_zero(const uint8_t* p, size_t n) {
  // Word-wise; the page is readable (checked) and word-aligned.
  const auto* w = reinterpret_cast<const uint64_t*>(p);
  for (size_t i = 0; i < n / 8; i++)
    if (w[i]) return false;
  return true;
}

// Which pages of a private anonymous range were never touched, so are zero
// and need not even be read, from /proc/self/pagemap (one 64-bit entry per
// page: bit 63 present, bit 62 swapped). The entries are read into memory of
// their own, so reading them inside the write fence allocates nothing. Read
// once before the fence (a page neither present nor swapped is untouched)
// and once inside it (the fence's markers on untouched pages look like swap
// entries, but a page a writer populated in between is present): a page is
// skipped when it was untouched before and is not present inside. Without
// pagemap every page is read. Only for private anonymous memory: a shared
// mapping's pages can hold data without a page table entry here.
class PageMap {
 public:
  PageMap(uint64_t addr, uint64_t npages, size_t pg) : addr_(addr), n_(npages), pg_(pg) {
    fd_ = UniqueFd(::open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC));
    if (!fd_) return;
    auto b = MmapArea::map(size_t(npages * 16), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                           -1, 0, "pagemap entries");
    if (b) buf_ = std::move(*b);
    before_ = fill(0);
  }
  // Inside the fence (or right before copying without one).
  void reread() { after_ = before_ && fill(n_); }
  bool untouched(uint64_t k) const {
    if (!after_) return false;
    const auto* e = static_cast<const uint64_t*>(buf_.get());
    return !(e[k] & (uint64_t(3) << 62)) && !(e[n_ + k] & (uint64_t(1) << 63));
  }

 private:
  bool fill(uint64_t at) {
    if (!fd_ || !buf_) return false;
    const size_t want = size_t(n_ * 8);
    auto* dst = static_cast<uint64_t*>(buf_.get()) + at;
    return ::pread(fd_.get(), dst, want, off_t(addr_ / pg_ * 8)) == ssize_t(want);
  }
  uint64_t addr_, n_;
  size_t pg_;
  UniqueFd fd_;
  MmapArea buf_;
  bool before_ = false, after_ = false;
};

// Copies pages [k0, k0 + npages) of a run into the memfd view, skipping
// untouched pages (`pm`, may be null) and pages that are all zero (the memfd
// reads zero there without allocating a page).
void copy_pages(uint8_t* dst, const uint8_t* src, uint64_t k0, uint64_t npages, size_t pg,
                const PageMap* pm) {
  for (uint64_t k = k0; k < k0 + npages; k++) {
    if (pm && pm->untouched(k)) continue;
    const uint64_t o = k * pg;
    if (!all_zero(src + o, pg)) std::memcpy(dst + o, src + o, pg);
  }
}

void copy_run(uint8_t* dst, const uint8_t* src, uint64_t len, size_t pg) {
  copy_pages(dst, src, 0, len / pg, pg, nullptr);
}

// A userfaultfd write-protection over [lo, hi) of private anonymous memory
// for the time its contents are copied and the memfd is mapped over it
// (service.md, "Concurrent writers"): another thread writing there waits in
// its page fault instead of writing into pages about to be replaced; closing
// the descriptor wakes it, and its fault is retried on the new mapping. Needs
// UFFD_FEATURE_WP_UNPOPULATED (Linux 6.4) so untouched pages are protected
// too; without it, or when userfaultfd is not allowed or the range is
// registered with another userfaultfd, there is no fence and the window
// stays open. While armed, the arming thread must not write into [lo, hi)
// nor call anything that could (malloc): it would wait on itself.
class WriteFence {
 public:
  WriteFence(uint64_t lo, uint64_t hi) {
    fd_ = open_uffd();
    if (!fd_) return;
    uffdio_register reg{};
    reg.range = {lo, hi - lo};
    reg.mode = UFFDIO_REGISTER_MODE_WP;
    uffdio_writeprotect wp{};
    wp.range = {lo, hi - lo};
    wp.mode = UFFDIO_WRITEPROTECT_MODE_WP;
    if (::ioctl(fd_.get(), UFFDIO_REGISTER, &reg) != 0 ||
        ::ioctl(fd_.get(), UFFDIO_WRITEPROTECT, &wp) != 0)
      fd_.close();  // closing unregisters whatever was registered
  }
  bool armed() const { return fd_.valid(); }
  // Lifts the fence and wakes every writer waiting on it.
  void release() { fd_.close(); }

  // A userfaultfd with write protection of unpopulated pages, or none.
  static UniqueFd open_uffd() {
    UniqueFd fd(int(::syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK)));
    if (!fd && errno == EPERM)  // unprivileged: faults from user mode only
      fd = UniqueFd(int(::syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | kUserModeOnly)));
    if (!fd) return {};
    uffdio_api api{};
    api.api = UFFD_API;
    api.features = kWpUnpopulated;
    if (::ioctl(fd.get(), UFFDIO_API, &api) != 0 || !(api.features & kWpUnpopulated)) return {};
    return fd;
  }

 private:
  // Newer than Debian 12's headers; the kernel decides at run time.
  static constexpr uint64_t kWpUnpopulated = uint64_t(1) << 13;  // UFFD_FEATURE_WP_UNPOPULATED
  static constexpr int kUserModeOnly = 1;                        // UFFD_USER_MODE_ONLY
  UniqueFd fd_;
};

// Moves the private anonymous lines [first, last] (contiguous) onto a new
// area: fence off writers, copy the contents (interior pages first, the two
// edge pages last, they hold neighbouring objects other threads may be
// writing), then map the memfd over the same addresses with each line's
// protection, and lift the fence. Nothing between arming and lifting the
// fence allocates or writes into the range.
Status remap_gap(Registry& reg, const std::vector<MapLine>& lines, size_t first, size_t last,
                 uint64_t g0, uint64_t g1) {
  const size_t pg = page_size();
  auto n = new_area(reg, g1 - g0);
  if (!n) return std::move(n).error();
  const int fd = reg.areas[*n].fd.get();
  auto view =
      MmapArea::map(size_t(g1 - g0), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0, "a new memfd area");
  if (!view) return std::move(view).error();
  auto* dst = static_cast<uint8_t*>(view->get());
  const auto* src = reinterpret_cast<const uint8_t*>(uintptr_t(g0));
  const uint64_t len = g1 - g0;
  const uint64_t np = len / pg;
  PageMap pages(g0, np, pg);
  WriteFence fence(g0, g1);  // when it cannot be armed, the window stays open
  pages.reread();
  if (np > 2) copy_pages(dst, src, 1, np - 2, pg, &pages);
  copy_pages(dst, src, 0, 1, pg, &pages);
  if (np > 1) copy_pages(dst, src, np - 1, 1, pg, &pages);
  // One mmap per run of equal protection (usually one for the whole gap).
  size_t failed = last + 1;
  int err = 0;
  for (size_t i = first; i <= last;) {
    size_t j = i;
    while (j < last && lines[j + 1].prot() == lines[i].prot()) j++;
    const uint64_t s = std::max(lines[i].start, g0), e = std::min(lines[j].end, g1);
    void* p = ::mmap(reinterpret_cast<void*>(uintptr_t(s)), size_t(e - s), lines[i].prot(),
                     MAP_SHARED | MAP_FIXED, fd, off_t(s - g0));
    if (p == MAP_FAILED) {
      err = errno;
      failed = i;
      break;
    }
    i = j + 1;
  }
  fence.release();
  if (failed <= last) return Error(err, "mapping memfd over " + lines[failed].range());
  return {};
}

size_t prune(Registry& reg, const std::vector<MapLine>& maps) {
  std::map<uint64_t, bool> seen;
  for (const MapLine& m : maps) {
    uint64_t n = 0;
    if (area_of(reg, m, &n)) seen[n] = true;
  }
  size_t dropped = 0;
  for (auto it = reg.areas.begin(); it != reg.areas.end();) {
    if (seen.count(it->first)) {
      ++it;
    } else {
      it = reg.areas.erase(it);
      dropped++;
    }
  }
  return dropped;
}

// The lines of `maps` that meet [lo, hi), checked to cover it without holes.
Result<std::pair<size_t, size_t>> lines_over(const std::vector<MapLine>& maps, uint64_t lo,
                                             uint64_t hi) {
  size_t i = 0;
  while (i < maps.size() && maps[i].end <= lo) i++;
  const size_t first = i;
  uint64_t at = lo;
  for (; i < maps.size() && maps[i].start < hi; i++) {
    if (maps[i].start > at) break;
    at = maps[i].end;
  }
  if (at < hi) return Error(EFAULT, "share_range: " + hex(at) + " is not mapped");
  return std::make_pair(first, i);
}

// Checks every line over [lo, hi) before anything changes.
Status check_lines(const Registry& reg, const std::vector<MapLine>& maps, size_t b, size_t e,
                   uint64_t lo, uint64_t hi) {
  const auto [s0, s1] = own_stack();
  if (s0 < hi && lo < s1)
    return Error(EOPNOTSUPP, "share_range: [" + hex(lo) + ", " + hex(hi) +
                                 ") is on the calling thread's stack; service mode cannot "
                                 "register stack memory: use exclusive mode "
                                 "(MRC_MODE=exclusive) or mrc_alloc_buf");
  for (size_t i = b; i < e; i++) {
    const MapLine& m = maps[i];
    uint64_t n = 0;
    if (area_of(reg, m, &n)) continue;
    if (!private_anonymous(m)) return Error(EOPNOTSUPP, "share_range: " + refusal(m));
    if (!m.r)
      return Error(EACCES, "share_range: the mapping " + m.range() +
                               " is not readable (a guard page or PROT_NONE memory)");
  }
  return {};
}

// The pieces over [lo, hi) once every line there is one of ours.
Result<std::vector<SharedPiece>> collect(const Registry& reg, const std::vector<MapLine>& maps,
                                         uint64_t lo, uint64_t hi, uint64_t first_new) {
  auto span = lines_over(maps, lo, hi);
  if (!span) return std::move(span).error();
  std::vector<SharedPiece> out;
  uint64_t last_n = 0;
  for (size_t i = span->first; i < span->second; i++) {
    const MapLine& m = maps[i];
    uint64_t n = 0;
    const Area* a = area_of(reg, m, &n);
    if (!a)
      return Error(EAGAIN, "share_range: the mapping " + m.range() +
                               " changed while it was being shared (another thread mapped or "
                               "unmapped memory there); try again");
    const uint64_t s = std::max(m.start, lo), e = std::min(m.end, hi);
    const uint64_t off = m.offset + (s - m.start);
    if (!out.empty() && last_n == n && out.back().addr + out.back().len == s &&
        out.back().fd_offset + out.back().len == off) {
      out.back().len += e - s;
      continue;
    }
    auto fd =
        UniqueFd::dup(a->fd.get(), "memfd " + std::string(kAreaNamePrefix) + std::to_string(n));
    if (!fd) return std::move(fd).error();
    out.push_back(SharedPiece{std::move(*fd), off, s, e - s, n, n >= first_new});
    last_n = n;
  }
  if (out.size() > kMaxPieces)
    return Error(E2BIG, "share_range: [" + hex(lo) + ", " + hex(hi) + ") spans " +
                            std::to_string(out.size()) + " pieces (at most " +
                            std::to_string(kMaxPieces) + " per registration)");
  return out;
}

}  // namespace

Result<std::vector<SharedPiece>> share_range(void* addr, size_t len) {
  if (len == 0) return std::vector<SharedPiece>{};
  const uint64_t pg = page_size();
  const uint64_t a = uint64_t(uintptr_t(addr));
  if (a + len < a || a + len > UINT64_MAX - pg)
    return Error(EINVAL, "share_range: the range wraps around the address space");
  const uint64_t lo = a & ~(pg - 1), hi = (a + len + pg - 1) & ~(pg - 1);
  Registry& reg = registry();
  std::lock_guard<std::mutex> lock(reg.mu);
  auto maps = read_maps();
  if (!maps) return std::move(maps).error();
  auto span = lines_over(*maps, lo, hi);
  if (!span) return std::move(span).error();
  MRC_TRY(check_lines(reg, *maps, span->first, span->second, lo, hi));
  // Every maximal run of private anonymous lines becomes one new area.
  const uint64_t first_new = reg.next;
  bool changed = false;
  for (size_t i = span->first; i < span->second;) {
    if (!private_anonymous((*maps)[i])) {
      i++;
      continue;
    }
    size_t j = i;
    while (j + 1 < span->second && private_anonymous((*maps)[j + 1]) &&
           (*maps)[j + 1].start == (*maps)[j].end)
      j++;
    const uint64_t g0 = std::max((*maps)[i].start, lo), g1 = std::min((*maps)[j].end, hi);
    MRC_TRY(remap_gap(reg, *maps, i, j, g0, g1));
    changed = true;
    i = j + 1;
  }
  if (changed) {
    maps = read_maps();
    if (!maps) return std::move(maps).error();
  }
  prune(reg, *maps);
  return collect(reg, *maps, lo, hi, first_new);
}

Result<void*> alloc_shared(size_t len) {
  if (len == 0) return Error(EINVAL, "alloc_shared: zero length");
  const uint64_t pg = page_size();
  if (len > (uint64_t(1) << 40)) return Error(EINVAL, "alloc_shared: longer than 1 TiB");
  const uint64_t size = (uint64_t(len) + pg - 1) & ~(pg - 1);
  Registry& reg = registry();
  std::lock_guard<std::mutex> lock(reg.mu);
  auto n = new_area(reg, size);
  if (!n) return std::move(n).error();
  void* p =
      ::mmap(nullptr, size_t(size), PROT_READ | PROT_WRITE, MAP_SHARED, reg.areas[*n].fd.get(), 0);
  if (p == MAP_FAILED) {
    const int e = errno;
    reg.areas.erase(*n);
    return Error(e, "alloc_shared: mapping " + std::to_string(size) + " bytes");
  }
  return p;
}

Status free_shared(void* p, size_t len) {
  if (!p) return {};
  const uint64_t pg = page_size();
  if (uint64_t(uintptr_t(p)) % pg) return Error(EINVAL, "free_shared: not a page address");
  const uint64_t size = (uint64_t(len) + pg - 1) & ~(pg - 1);
  if (::munmap(p, size_t(size)) != 0) return Error(errno, "free_shared: munmap");
  auto r = release_unmapped_areas();
  if (!r) return std::move(r).error();
  return {};
}

Result<size_t> release_unmapped_areas() {
  Registry& reg = registry();
  std::lock_guard<std::mutex> lock(reg.mu);
  auto maps = read_maps();
  if (!maps) return std::move(maps).error();
  return prune(reg, *maps);
}

bool write_fence_supported() {
  static const bool ok = WriteFence::open_uffd().valid();
  return ok;
}

size_t shared_area_count() {
  Registry& reg = registry();
  std::lock_guard<std::mutex> lock(reg.mu);
  return reg.areas.size();
}

}  // namespace mrc::svc
