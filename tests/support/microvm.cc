#include "tests/support/microvm.h"

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>

#include "base/subprocess.h"

namespace stasis::testing {

using namespace std::chrono_literals;

const std::string& MicrovmTestBundle() {
  static const std::string dir = [] {
    if (const char* env = std::getenv("STASIS_MICROVM_BUNDLE"); env && *env)
      return std::string(env);
    auto r = RunCommand({std::string(STASIS_SOURCE_DIR) + "/hack/make-microvm-bundle.sh"}, 600s);
    if (!r.ok() || !r->success()) {
      std::cerr << "hack/make-microvm-bundle.sh failed: "
                << (r.ok() ? r->err : r.status().ToString()) << "\n";
      std::abort();
    }
    std::string out = r->out;
    while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
    return out;
  }();
  return dir;
}

std::string MicrovmTestAccel() {
  if (const char* env = std::getenv("STASIS_MICROVM_ACCEL"); env && *env) return env;
  return "tcg";
}

long LastCount(const std::string& console_log) {
  std::ifstream in(console_log);
  long last = -1;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.rfind("count ", 0) != 0) continue;
    try {
      last = std::stol(line.substr(6));
    } catch (...) {
    }
  }
  return last;
}

int BootCount(const std::string& console_log) {
  std::ifstream in(console_log);
  int boots = 0;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line == "booted") ++boots;
  }
  return boots;
}

}  // namespace stasis::testing
