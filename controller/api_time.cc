#include "controller/api_time.h"

#include <cstdio>
#include <ctime>

namespace stasis {
namespace {

std::string Format(std::chrono::system_clock::time_point t, bool micros) {
  auto secs = std::chrono::floor<std::chrono::seconds>(t);
  auto us = std::chrono::duration_cast<std::chrono::microseconds>(t - secs).count();
  std::time_t tt = std::chrono::system_clock::to_time_t(secs);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[64];
  int n = std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d", tm.tm_year + 1900,
                        tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
  if (micros) n += std::snprintf(buf + n, sizeof buf - n, ".%06lld", static_cast<long long>(us));
  std::snprintf(buf + n, sizeof buf - n, "Z");
  return buf;
}

}  // namespace

std::string FormatApiTime(std::chrono::system_clock::time_point t) { return Format(t, false); }
std::string FormatApiMicroTime(std::chrono::system_clock::time_point t) { return Format(t, true); }

}  // namespace stasis
