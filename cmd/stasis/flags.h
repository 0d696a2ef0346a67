// The stasis binary's command line: flags with STASIS_<FLAG> environment equivalents
// (--metrics-addr can also be set as STASIS_METRICS_ADDR; the command line wins). Unknown
// flags and malformed values are errors, never ignored.
//
// It lives in cmd/, not in the controller runtime, because only executables parse flags: the
// roles take option structs (NodeAgentOptions, ClusterControllerOptions) that tests fill in
// directly, and the STASIS_ prefix is this binary's convention, not a library's. The one other
// user is a benchmark program that takes the agent's flags verbatim (bench_pause_overhead).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/status.h"

namespace stasis {

class Flags {
 public:
  // Declares a flag with its default and help text.
  void Define(const std::string& name, const std::string& default_value, const std::string& help);
  // A flag that may be given more than once: Get joins the values with ','. Its environment
  // variable takes the same comma-separated list; any command-line occurrence replaces it.
  void DefineRepeated(const std::string& name, const std::string& help);
  // Parses argv (from the first flag on) and the environment. --help sets help_requested().
  // A flag whose default is true or false is boolean: its value must be one of Go's
  // strconv.ParseBool spellings (1, t, T, TRUE, true, True and their false twins), else an error.
  [[nodiscard]] Status Parse(const std::vector<std::string>& args);

  const std::string& Get(const std::string& name) const;
  Result<int> GetInt(const std::string& name, int min, int max) const;
  Result<double> GetSeconds(const std::string& name) const;  // "15", "15s", "500ms", "2m"
  // A size in bytes, "0" or more: plain, or with a Kubernetes quantity's suffix, K M G T
  // (powers of 1000) or Ki Mi Gi Ti (powers of 1024): "50Gi".
  Result<int64_t> GetBytes(const std::string& name) const;
  bool GetBool(const std::string& name) const;  // a boolean flag, checked by Parse
  bool help_requested() const { return help_; }
  std::string Usage() const;
  // "metrics-addr" → "STASIS_METRICS_ADDR"
  static std::string EnvName(const std::string& flag);

 private:
  struct Def {
    std::string value, help, default_value;
    bool repeated = false;
    bool seen = false;  // given on the command line (a repeated flag appends from the second on)
  };
  Status ParseArgs(const std::vector<std::string>& args);

  std::map<std::string, Def> defs_;
  std::vector<std::string> order_;
  bool help_ = false;
};

}  // namespace stasis
