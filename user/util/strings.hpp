// Small string helpers shared by the tools and test programs.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace mrc::util {

// The fields of s between the separators: "a,,b" gives "a", "", "b" and ""
// gives one empty field; with skip_empty the empty fields are left out ("" then
// gives none).
inline std::vector<std::string> split(std::string_view s, char sep, bool skip_empty = false) {
  std::vector<std::string> out;
  for (size_t start = 0;;) {
    size_t at = s.find(sep, start);
    std::string_view f =
        s.substr(start, at == std::string_view::npos ? std::string_view::npos : at - start);
    if (!skip_empty || !f.empty()) out.emplace_back(f);
    if (at == std::string_view::npos) break;
    start = at + 1;
  }
  return out;
}

}  // namespace mrc::util
