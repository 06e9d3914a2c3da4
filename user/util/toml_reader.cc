#include "util/toml_reader.hpp"

namespace mrc::config {

Result<toml::table> parse_file(const std::string& path) {
  try {
    return toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    std::string d(e.description());
    if (e.source().begin.line == 0) return Error(ENOENT, path + ": " + d);
    return Error(EINVAL, path + ":" + std::to_string(e.source().begin.line) + ": " + d);
  }
}

Status tables_only(const std::string& file, const toml::table& root,
                   std::initializer_list<const char*> names) {
  for (const char* s : names) {
    const toml::node* n = root.get(s);
    if (n && !n->is_table())
      return Error(EINVAL, file + ":" + std::to_string(n->source().begin.line) + ": [" + s +
                               "] must be a table");
  }
  return ok_status();
}

std::string Reader::at(const toml::node& n) const {
  return file_ + ":" + std::to_string(n.source().begin.line) + ": ";
}

std::string Reader::at_table() const {
  return file_ + ":" + std::to_string(t_.source().begin.line) + ": ";
}

Status Reader::str(const char* key, std::string* out, bool* found) {
  seen_.insert(key);
  if (found) *found = false;
  const toml::node* n = t_.get(key);
  if (!n) return ok_status();
  auto v = n->value<std::string>();
  if (!v) return Error(EINVAL, at(*n) + where_ + key + " must be a string");
  *out = *v;
  if (found) *found = true;
  return ok_status();
}

Status Reader::boolean(const char* key, bool* out, bool* found) {
  seen_.insert(key);
  if (found) *found = false;
  const toml::node* n = t_.get(key);
  if (!n) return ok_status();
  auto v = n->value<bool>();
  if (!v || !n->is_boolean())
    return Error(EINVAL, at(*n) + where_ + key + " must be true or false");
  *out = *v;
  if (found) *found = true;
  return ok_status();
}

Status Reader::integer_(const char* key, int64_t* out, int64_t lo, int64_t hi, bool* found) {
  seen_.insert(key);
  const toml::node* n = t_.get(key);
  if (!n) return ok_status();
  if (!n->is_integer())
    return Error(EINVAL, at(*n) + where_ + key + " must be an integer in " + std::to_string(lo) +
                             ".." + std::to_string(hi));
  int64_t v = *n->value<int64_t>();
  if (v < lo || v > hi)
    return Error(EINVAL, at(*n) + where_ + key + " = " + std::to_string(v) + " is outside " +
                             std::to_string(lo) + ".." + std::to_string(hi));
  *out = v;
  *found = true;
  return ok_status();
}

Status Reader::number(const char* key, double* out, double lo, double hi) {
  seen_.insert(key);
  const toml::node* n = t_.get(key);
  if (!n) return ok_status();
  if (!n->is_number()) return Error(EINVAL, at(*n) + where_ + key + " must be a number");
  double v = *n->value<double>();
  if (!(v >= lo && v <= hi))
    return Error(EINVAL, at(*n) + where_ + key + " = " + std::to_string(v) + " is outside " +
                             std::to_string(lo) + ".." + std::to_string(hi));
  *out = v;
  return ok_status();
}

Status Reader::done() {
  for (const auto& [k, v] : t_) {
    std::string key(k.str());
    if (!seen_.count(key)) return Error(EINVAL, at(v) + "unknown key " + where_ + key);
  }
  return ok_status();
}

}  // namespace mrc::config
