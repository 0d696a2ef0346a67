#include "base/time.h"

#include <cstdio>

namespace stasis {
namespace {

// Reads exactly `n` digits at text[*pos]; false when they are not there.
bool ReadDigits(std::string_view text, size_t* pos, int n, int* out) {
  if (*pos + n > text.size()) return false;
  int v = 0;
  for (int i = 0; i < n; ++i) {
    char c = text[*pos + i];
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  *pos += n;
  *out = v;
  return true;
}

bool Expect(std::string_view text, size_t* pos, char a, char b = '\0') {
  if (*pos >= text.size()) return false;
  char c = text[*pos];
  if (c != a && (b == '\0' || c != b)) return false;
  ++*pos;
  return true;
}

}  // namespace

std::string FormatTime(Time t) {
  using namespace std::chrono;
  const sys_days day = floor<days>(t);
  const year_month_day ymd{day};
  const hh_mm_ss<seconds> hms{t - day};
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%04d-%02u-%02uT%02d:%02d:%02dZ", static_cast<int>(ymd.year()),
                static_cast<unsigned>(ymd.month()), static_cast<unsigned>(ymd.day()),
                static_cast<int>(hms.hours().count()), static_cast<int>(hms.minutes().count()),
                static_cast<int>(hms.seconds().count()));
  return buf;
}

std::string FormatTime(std::chrono::system_clock::time_point t) {
  return FormatTime(std::chrono::floor<std::chrono::seconds>(t));
}

std::string FormatMicroTime(std::chrono::system_clock::time_point t) {
  const Time secs = std::chrono::floor<std::chrono::seconds>(t);
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(t - secs).count();
  std::string out = FormatTime(secs);
  char frac[16];
  std::snprintf(frac, sizeof frac, ".%06lld", static_cast<long long>(us));
  out.insert(out.size() - 1, frac);  // before the "Z"
  return out;
}

Result<Time> ParseTime(std::string_view text) {
  using namespace std::chrono;
  auto bad = [&] {
    return Status(Code::kInvalidArgument,
                  "not an RFC 3339 date-time: \"" + std::string(text) + "\"");
  };
  size_t pos = 0;
  int y, mo, d, h, mi, s;
  if (!ReadDigits(text, &pos, 4, &y) || !Expect(text, &pos, '-') ||
      !ReadDigits(text, &pos, 2, &mo) || !Expect(text, &pos, '-') ||
      !ReadDigits(text, &pos, 2, &d) || !Expect(text, &pos, 'T', 't') ||
      !ReadDigits(text, &pos, 2, &h) || !Expect(text, &pos, ':') ||
      !ReadDigits(text, &pos, 2, &mi) || !Expect(text, &pos, ':') ||
      !ReadDigits(text, &pos, 2, &s)) {
    return bad();
  }
  if (pos < text.size() && text[pos] == '.') {
    ++pos;
    size_t start = pos;
    while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') ++pos;
    if (pos == start) return bad();
  }
  int offset_minutes = 0;
  if (Expect(text, &pos, 'Z', 'z')) {
    // UTC
  } else if (pos < text.size() && (text[pos] == '+' || text[pos] == '-')) {
    const int sign = text[pos] == '-' ? -1 : 1;
    ++pos;
    int oh, om;
    if (!ReadDigits(text, &pos, 2, &oh) || !Expect(text, &pos, ':') ||
        !ReadDigits(text, &pos, 2, &om) || oh > 23 || om > 59) {
      return bad();
    }
    offset_minutes = sign * (oh * 60 + om);
  } else {
    return bad();
  }
  if (pos != text.size()) return bad();
  const year_month_day ymd{year{y}, month{static_cast<unsigned>(mo)},
                           day{static_cast<unsigned>(d)}};
  if (!ymd.ok() || h > 23 || mi > 59 || s > 60) return bad();  // 60: a leap second
  return Time{sys_days{ymd}.time_since_epoch() + hours{h} + minutes{mi} + seconds{s} -
              minutes{offset_minutes}};
}

}  // namespace stasis
