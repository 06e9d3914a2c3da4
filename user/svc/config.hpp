// mrc-serviced's configuration: a TOML file (mrc-serviced.toml.sample lists
// every key; Documentation/service.md, "Configuration") and the command line,
// whose options override the file. The file is `--config FILE`, else
// kDefaultConfig when it exists. A bad file or option is refused before
// anything starts, with "FILE:LINE: reason" for the file.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "mrc/result.hpp"
#include "svc/server.hpp"

namespace mrc::svc {

#ifndef MRC_SERVICED_CONFIG
#define MRC_SERVICED_CONFIG "/etc/mrc/mrc-serviced.toml"
#endif
constexpr const char* kDefaultConfig = MRC_SERVICED_CONFIG;

// Reads FILE into *o (keys it does not set stay as they are). Each limit the
// file sets is named "FILE [limits] KEY" in the service's refusals.
Status load_config(const std::string& path, ServerOptions* o);

struct ServicedArgs {
  ServerOptions opts;
  std::string config;  // the file read, "" for none
  bool help = false;
  bool check = false;  // --check: validate the configuration and exit
};
// argv: the file first (--config FILE, else the default one when present;
// --no-config: none), then every option over it. `default_config` is
// kDefaultConfig but for tests. Errors are sentences without the program name.
Result<ServicedArgs> parse_args(const std::vector<std::string>& args,
                                const std::string& default_config = kDefaultConfig);
std::string usage();

// One setting of ServerOptions that the file (and its option) sets, and what
// a reload (SIGHUP) does with it. settings() is the one table of them all:
// restart_only_changes() and apply_reloadable() read nothing else, and the
// unit test holds it against every key of mrc-serviced.toml.sample.
struct Setting {
  const char* key;  // as the file spells it: "limits.qps", "engine.nice"
  bool reloadable;  // a reload takes it; else it waits for a restart
  // Whether a and b differ in it (a limit: its value or its source).
  bool (*changed)(const ServerOptions& a, const ServerOptions& b);
  // Reloadable ones: copies it (a limit: with its source) from `from`.
  void (*take)(ServerOptions& to, const ServerOptions& from);
};
std::span<const Setting> settings();

// The settings that differ between `was` and `now` and take effect only at a
// restart (a reload keeps the running ones): the file's key names, e.g.
// "service.socket", "engine.sched" (service.md, "Configuration", reload).
std::vector<std::string> restart_only_changes(const ServerOptions& was, const ServerOptions& now);

// Copies every reloadable setting of `next` into `live` (Server::reload,
// under its lock); the restart-only ones of `live` stay.
void apply_reloadable(ServerOptions& live, const ServerOptions& next);

}  // namespace mrc::svc
