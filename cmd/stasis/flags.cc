#include "cmd/stasis/flags.h"

#include <cstdint>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>

namespace stasis {

void Flags::Define(const std::string& name, const std::string& default_value,
                   const std::string& help) {
  defs_[name] = Def{default_value, help, default_value};
  order_.push_back(name);
}

void Flags::DefineRepeated(const std::string& name, const std::string& help) {
  Define(name, "", help);
  defs_[name].repeated = true;
}

std::string Flags::EnvName(const std::string& flag) {
  std::string env = "STASIS_";
  for (char c : flag) env.push_back(c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c))));
  return env;
}

namespace {

// Go's strconv.ParseBool set, as kubelet and client-go flags take them.
std::optional<bool> ParseBool(const std::string& v) {
  static const std::set<std::string> kTrue = {"1", "t", "T", "TRUE", "true", "True"};
  static const std::set<std::string> kFalse = {"0", "f", "F", "FALSE", "false", "False"};
  if (kTrue.count(v)) return true;
  if (kFalse.count(v)) return false;
  return std::nullopt;
}

bool IsBoolFlag(const std::string& default_value) { return default_value == "true" || default_value == "false"; }

}  // namespace

Status Flags::Parse(const std::vector<std::string>& args) {
  if (Status s = ParseArgs(args); !s.ok()) return s;
  // A boolean is true or false, never silently false: "yes" or "on" is an error, not a default.
  for (auto& [name, def] : defs_) {
    if (!IsBoolFlag(def.default_value)) continue;
    const auto b = ParseBool(def.value);
    if (!b) {
      return Status(Code::kInvalidArgument, "--" + name + " (or " + EnvName(name) + ") is \"" + def.value +
                                                "\": want true or false (1, t, T, TRUE, true, True, 0, f, F, "
                                                "FALSE, false, False)");
    }
    def.value = *b ? "true" : "false";
  }
  return OkStatus();
}

Status Flags::ParseArgs(const std::vector<std::string>& args) {
  for (auto& [name, def] : defs_) {
    if (const char* env = std::getenv(EnvName(name).c_str()); env && *env) def.value = env;
  }
  for (size_t i = 0; i < args.size(); ++i) {
    std::string a = args[i];
    if (a == "--help" || a == "-h") {
      help_ = true;
      continue;
    }
    if (a.rfind("--", 0) != 0) return Status(Code::kInvalidArgument, "unexpected argument: " + a);
    a = a.substr(2);
    std::string value;
    bool has_value = false;
    if (auto eq = a.find('='); eq != std::string::npos) {
      value = a.substr(eq + 1);
      a = a.substr(0, eq);
      has_value = true;
    }
    auto it = defs_.find(a);
    if (it == defs_.end()) return Status(Code::kInvalidArgument, "unknown flag --" + a);
    if (!has_value) {
      const bool is_bool = IsBoolFlag(it->second.default_value);
      if (is_bool && (i + 1 >= args.size() || args[i + 1].rfind("--", 0) == 0)) {
        value = "true";
      } else {
        if (i + 1 >= args.size()) return Status(Code::kInvalidArgument, "flag --" + a + " needs a value");
        value = args[++i];
      }
    }
    Def& def = it->second;
    def.value = def.repeated && def.seen ? def.value + "," + value : value;
    def.seen = true;
  }
  return OkStatus();
}

const std::string& Flags::Get(const std::string& name) const { return defs_.at(name).value; }

Result<int> Flags::GetInt(const std::string& name, int min, int max) const {
  const std::string& v = Get(name);
  try {
    size_t used = 0;
    int n = std::stoi(v, &used);
    if (used != v.size() || n < min || n > max) throw std::out_of_range("");
    return n;
  } catch (...) {
    return Status(Code::kInvalidArgument, "--" + name + "=" + v + ": want an integer in [" +
                                              std::to_string(min) + ", " + std::to_string(max) + "]");
  }
}

Result<int64_t> Flags::GetBytes(const std::string& name) const {
  const std::string& v = Get(name);
  static const std::map<std::string, int64_t> kUnits = {
      {"", 1},           {"K", 1000},          {"M", 1000'000},          {"G", 1000'000'000},
      {"T", 1000'000'000'000}, {"Ki", 1LL << 10}, {"Mi", 1LL << 20}, {"Gi", 1LL << 30}, {"Ti", 1LL << 40}};
  size_t digits = 0;
  while (digits < v.size() && v[digits] >= '0' && v[digits] <= '9') ++digits;
  const auto unit = kUnits.find(v.substr(digits));
  if (digits > 0 && digits <= 15 && unit != kUnits.end()) {
    const int64_t n = std::stoll(v.substr(0, digits));
    if (n <= INT64_MAX / unit->second) return n * unit->second;
  }
  return Status(Code::kInvalidArgument,
                "--" + name + "=" + v + ": want a size in bytes, plain or with K, M, G, T, Ki, Mi, Gi or Ti (\"50Gi\")");
}

Result<double> Flags::GetSeconds(const std::string& name) const {
  const std::string& v = Get(name);
  try {
    size_t used = 0;
    double n = std::stod(v, &used);
    std::string unit = v.substr(used);
    double scale = unit.empty() || unit == "s" ? 1 : unit == "ms" ? 0.001 : unit == "m" ? 60 : unit == "h" ? 3600 : -1;
    if (scale < 0 || n < 0) throw std::invalid_argument("");
    return n * scale;
  } catch (...) {
    return Status(Code::kInvalidArgument, "--" + name + "=" + v + ": want a duration like 15s, 500ms, 2m");
  }
}

bool Flags::GetBool(const std::string& name) const { return Get(name) == "true"; }

std::string Flags::Usage() const {
  std::string out;
  for (const auto& name : order_) {
    const auto& d = defs_.at(name);
    out += "  --" + name + (d.default_value.empty() ? "" : " (default " + d.default_value + ")") +
           "\n      " + d.help + " [env " + EnvName(name) + "]\n";
  }
  return out;
}

}  // namespace stasis
