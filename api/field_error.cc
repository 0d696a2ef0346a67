#include "api/field_error.h"

#include <cstdint>
#include <cstdio>

namespace stasis::api {
namespace {

const char* TypeText(FieldErrorType type) {
  switch (type) {
    case FieldErrorType::kRequired:
      return "Required value";
    case FieldErrorType::kInvalid:
      return "Invalid value";
    case FieldErrorType::kNotSupported:
      return "Unsupported value";
    case FieldErrorType::kDuplicate:
      return "Duplicate value";
    case FieldErrorType::kTooLong:
      return "Too long";
    case FieldErrorType::kTooMany:
      return "Too many";
    case FieldErrorType::kForbidden:
      return "Forbidden";
  }
  return "Invalid value";
}

// Length of the valid UTF-8 sequence at s[i], or 0 when it is not one.
size_t Utf8SequenceLength(std::string_view s, size_t i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  size_t n;
  uint32_t cp;
  if (b0 < 0x80) return 1;
  if ((b0 & 0xE0) == 0xC0) {
    n = 2;
    cp = b0 & 0x1F;
  } else if ((b0 & 0xF0) == 0xE0) {
    n = 3;
    cp = b0 & 0x0F;
  } else if ((b0 & 0xF8) == 0xF0) {
    n = 4;
    cp = b0 & 0x07;
  } else
    return 0;
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    const auto b = static_cast<unsigned char>(s[i + k]);
    if ((b & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b & 0x3F);
  }
  // Overlong forms, surrogates and values past U+10FFFF are invalid, as in Go.
  if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) ||
      (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) {
    return 0;
  }
  return n;
}

}  // namespace

std::string GoQuote(std::string_view s) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    char buf[8];
    switch (c) {
      case '\a':
        out += "\\a";
        ++i;
        continue;
      case '\b':
        out += "\\b";
        ++i;
        continue;
      case '\f':
        out += "\\f";
        ++i;
        continue;
      case '\n':
        out += "\\n";
        ++i;
        continue;
      case '\r':
        out += "\\r";
        ++i;
        continue;
      case '\t':
        out += "\\t";
        ++i;
        continue;
      case '\v':
        out += "\\v";
        ++i;
        continue;
      case '\\':
        out += "\\\\";
        ++i;
        continue;
      case '"':
        out += "\\\"";
        ++i;
        continue;
      default:
        break;
    }
    if (c < 0x20 || c == 0x7F) {
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
      ++i;
      continue;
    }
    const size_t n = Utf8SequenceLength(s, i);
    if (n == 0) {
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
      ++i;
      continue;
    }
    out.append(s.substr(i, n));
    i += n;
  }
  out += '"';
  return out;
}

std::string RenderInt(long long v) { return std::to_string(v); }

std::string FieldError::ToString() const {
  std::string s = field + ": " + TypeText(type);
  // Required, Forbidden and Too long never print the value (field.Error.ErrorBody).
  const bool prints_value = type != FieldErrorType::kRequired &&
                            type != FieldErrorType::kForbidden && type != FieldErrorType::kTooLong;
  if (prints_value && !bad_value.empty()) s += ": " + bad_value;
  if (!detail.empty()) s += ": " + detail;
  return s;
}

Status ToStatus(const FieldErrors& errors) {
  if (errors.empty()) return OkStatus();
  std::string message;
  for (const FieldError& e : errors) {
    if (!message.empty()) message += "; ";
    message += e.ToString();
  }
  return Status(Code::kInvalidArgument, message);
}

}  // namespace stasis::api
