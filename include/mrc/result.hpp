// Errors as values: Result<T> holds either a T or an Error (errno + context).
// Shaped like std::expected so the switch is mechanical once C++23 is the floor.
#pragma once

#include <cerrno>
#include <cstring>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>
#include <variant>

namespace mrc {

struct Error {
  int code = EINVAL;    // positive errno value
  std::string context;  // what failed, in words a user can act on

  Error() = default;
  Error(int c, std::string ctx) : code(c), context(std::move(ctx)) {}

  std::error_code ec() const { return {code, std::generic_category()}; }
  std::string message() const {
    std::string m = context;
    if (!m.empty()) m += ": ";
    m += std::strerror(code);
    return m;
  }
  // Prefixes more context ("loading mrc_xdp on eth1: ...").
  Error& wrap(const std::string& outer) {
    context = context.empty() ? outer : outer + ": " + context;
    return *this;
  }
};

inline Error make_error(int code, std::string ctx) { return Error(code, std::move(ctx)); }
// From a libbpf-style negative return value.
inline Error errno_error(int neg_or_pos, std::string ctx) {
  return Error(neg_or_pos < 0 ? -neg_or_pos : neg_or_pos, std::move(ctx));
}

template <class T>
class [[nodiscard]] Result {
 public:
  Result(const T& v) : v_(v) {}          // NOLINT(google-explicit-constructor)
  Result(T&& v) : v_(std::move(v)) {}    // NOLINT(google-explicit-constructor)
  Result(Error e) : v_(std::move(e)) {}  // NOLINT(google-explicit-constructor)

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::get<0>(std::move(v_)); }
  T* operator->() { return &std::get<0>(v_); }
  const T* operator->() const { return &std::get<0>(v_); }
  const Error& error() const& { return std::get<1>(v_); }
  Error&& error() && { return std::get<1>(std::move(v_)); }

 private:
  std::variant<T, Error> v_;
};

template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error e) : err_(std::move(e)), ok_(false) {}  // NOLINT(google-explicit-constructor)
  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error& error() const& { return err_; }
  Error&& error() && { return std::move(err_); }

 private:
  Error err_{0, {}};
  bool ok_ = true;
};

using Status = Result<void>;
inline Status ok_status() { return {}; }

}  // namespace mrc

// Propagates an error from an expression returning Result<...>.
#define MRC_TRY(expr)                                           \
  do {                                                          \
    auto mrc_try_r_ = (expr);                                   \
    if (!mrc_try_r_.ok()) return std::move(mrc_try_r_).error(); \
  } while (0)
