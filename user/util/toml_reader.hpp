// The configuration files' reader, shared by mrcd (mrcd.toml) and
// mrc-serviced (mrc-serviced.toml): a TOML file parsed with toml++, read one
// table at a time. Every error reads "FILE:LINE: reason", and a key a table
// does not know is refused (a typo is an error, not a silent default).
#pragma once

#include <toml++/toml.h>

#include <cstdint>
#include <set>
#include <string>

#include "mrc/result.hpp"

namespace mrc::config {

// Parses FILE. A missing or unreadable file is ENOENT "FILE: reason"; a
// syntax error EINVAL "FILE:LINE: reason".
Result<toml::table> parse_file(const std::string& path);

// "[NAME] must be a table" for each of `names` that is present and is not.
Status tables_only(const std::string& file, const toml::table& root,
                   std::initializer_list<const char*> names);

// Reads one table, refusing keys it does not know (done()).
class Reader {
 public:
  // `where` prefixes the key in messages ("limits." gives "limits.qps").
  Reader(const std::string& file, const toml::table& t, std::string where)
      : file_(file), t_(t), where_(std::move(where)) {}

  // "FILE:LINE: " of a node, of the table itself.
  std::string at(const toml::node& n) const;
  std::string at_table() const;

  // Each leaves *out alone when the key is absent and sets it when present;
  // `found` (optional) says whether it was.
  Status str(const char* key, std::string* out, bool* found = nullptr);
  Status boolean(const char* key, bool* out, bool* found = nullptr);
  Status number(const char* key, double* out, double lo, double hi);
  template <class T>
  Status integer(const char* key, T* out, int64_t lo, int64_t hi, bool* found = nullptr) {
    int64_t v = 0;
    bool f = false;
    MRC_TRY(integer_(key, &v, lo, hi, &f));
    if (f) *out = T(v);
    if (found) *found = f;
    return ok_status();
  }
  // Marks a key as known without reading it (the caller reads it itself).
  void known(const char* key) { seen_.insert(key); }
  // An error naming the first key of the table that no call above asked for.
  Status done();

 private:
  Status integer_(const char* key, int64_t* out, int64_t lo, int64_t hi, bool* found);
  const std::string& file_;
  const toml::table& t_;
  std::string where_;
  std::set<std::string> seen_;
};

}  // namespace mrc::config
