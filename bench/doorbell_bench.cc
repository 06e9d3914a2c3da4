// doorbell_bench: what one ring of the host service's doorbell costs, a
// pipe (before 2026-12-03) against the AF_UNIX stream pair written with
// MSG_NOSIGNAL (service.md section 2, "The doorbell is a socket"): one
// byte written, then read back by the same thread, N times, interleaved
// over rounds. Prints ns per ring for each. No root, no fabric.
//   doorbell_bench [N] [ROUNDS]
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>

namespace {

double ring_ns(int wr, int rd, bool sock, long n) {
  char buf[4096];
  const char one = 1;
  const auto t0 = std::chrono::steady_clock::now();
  for (long i = 0; i < n; i++) {
    if (sock)
      (void)!send(wr, &one, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    else
      (void)!write(wr, &one, 1);
    (void)!read(rd, buf, sizeof buf);
  }
  return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() /
         double(n);
}

// A whole positive number, or 0 (not a number, a suffix, out of range).
long whole(const char* s) {
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(s, &end, 10);
  return errno || end == s || *end || v <= 0 ? 0 : v;
}

}  // namespace

int main(int argc, char** argv) {
  const long n = argc > 1 ? whole(argv[1]) : 500000;
  const long rounds = argc > 2 ? whole(argv[2]) : 3;
  if (argc > 3 || n <= 0 || rounds <= 0 || rounds > 1000) {
    std::fprintf(stderr, "usage: doorbell_bench [N > 0] [ROUNDS 1-1000]\n");
    return 2;
  }
  for (long r = 1; r <= rounds; r++) {
    int p[2], s[2];
    if (pipe2(p, O_NONBLOCK | O_CLOEXEC) < 0 ||
        socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, s) < 0) {
      std::perror("doorbell_bench");
      return 1;
    }
    const double pipe_ns = ring_ns(p[1], p[0], false, n);
    const double sock_ns = ring_ns(s[1], s[0], true, n);
    std::printf("round %ld: pipe %.0f ns, socket pair %.0f ns per ring (write and read)\n", r,
                pipe_ns, sock_ns);
    for (int fd : {p[0], p[1], s[0], s[1]}) close(fd);
  }
  return 0;
}
