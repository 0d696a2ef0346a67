#include "cmd/stasis/logging.h"

#include <nlohmann/json.hpp>
#include <spdlog/pattern_formatter.h>

#include <cctype>
#include <memory>

#include "base/time.h"

namespace stasis {
namespace {

bool IsKeyChar(char c) {
  return std::islower(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)) || c == '_' ||
         c == '.';
}

// A quoted value starting at text[i] == '"': its unescaped content; `i` ends past the quote.
std::string QuotedValue(const std::string& text, size_t& i) {
  std::string value;
  for (++i; i < text.size() && text[i] != '"'; ++i) {
    if (text[i] == '\\' && i + 1 < text.size()) ++i;
    value.push_back(text[i]);
  }
  if (i < text.size()) ++i;
  return value;
}

class JsonFormatter final : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    const auto level = spdlog::level::to_string_view(msg.level);
    const std::string line = JsonLogLine(msg.time, std::string(level.data(), level.size()),
                                         std::string(msg.payload.data(), msg.payload.size())) +
                             "\n";
    dest.append(line.data(), line.data() + line.size());
  }
  std::unique_ptr<spdlog::formatter> clone() const override { return std::make_unique<JsonFormatter>(); }
};

}  // namespace

Result<spdlog::level::level_enum> ParseLogLevel(const std::string& level) {
  if (level == "debug") return spdlog::level::debug;
  if (level == "info") return spdlog::level::info;
  if (level == "warn") return spdlog::level::warn;
  if (level == "error") return spdlog::level::err;
  return Status(Code::kInvalidArgument, "--log-level \"" + level + "\": want debug, info, warn or error");
}

std::vector<std::pair<std::string, std::string>> LogFields(const std::string& text) {
  std::vector<std::pair<std::string, std::string>> fields;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && text[i] == ' ') ++i;
    const size_t key_start = i;
    while (i < text.size() && IsKeyChar(text[i])) ++i;
    const bool pair = i > key_start && i < text.size() && text[i] == '=';
    const std::string key = text.substr(key_start, i - key_start);
    if (pair) ++i;
    std::string value;
    if (i < text.size() && text[i] == '"') {
      value = QuotedValue(text, i);
    } else {
      const size_t start = i;
      while (i < text.size() && text[i] != ' ') ++i;
      value = text.substr(start, i - start);
    }
    if (pair) fields.emplace_back(key, value);
  }
  return fields;
}

std::string JsonLogLine(std::chrono::system_clock::time_point time, const std::string& level,
                        const std::string& text) {
  nlohmann::ordered_json j;
  j["time"] = FormatMicroTime(time);
  j["level"] = level;
  j["msg"] = text;
  for (const auto& [key, value] : LogFields(text)) {
    const bool reserved = key == "time" || key == "level" || key == "msg";
    j[reserved ? "field." + key : key] = value;
  }
  // Invalid UTF-8 (a path, a runsc message) is replaced, never an exception in a log call.
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

Status ConfigureLogging(const std::string& level, const std::string& format) {
  auto parsed = ParseLogLevel(level);
  if (!parsed.ok()) return parsed.status();
  if (format == "json") {
    spdlog::set_formatter(std::make_unique<JsonFormatter>());
  } else if (format != "text") {
    return Status(Code::kInvalidArgument, "--log-format \"" + format + "\": want text or json");
  }
  spdlog::set_level(*parsed);
  return OkStatus();
}

}  // namespace stasis
