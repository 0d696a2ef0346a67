// How the stasis binary logs: --log-level (debug, info, warn, error; anything else is an error,
// never silence) and --log-format: `text` (spdlog's default line around the event's own
// "what key=value …" text) or `json` (one JSON object per line for log pipelines: time, level,
// msg — the event's text as written — and each key=value pair of it as a field of its own).
#pragma once

#include <spdlog/spdlog.h>

#include <string>
#include <utility>
#include <vector>

#include "base/status.h"

namespace stasis {

Result<spdlog::level::level_enum> ParseLogLevel(const std::string& level);

// The key=value pairs of one event's text, in order: keys are [a-z0-9_.] words, values bare or
// double-quoted (\" and \\ inside quotes unescaped). Words that are no pair are skipped.
std::vector<std::pair<std::string, std::string>> LogFields(const std::string& text);

// One event as a JSON line (no newline): {"time": RFC 3339 with microseconds, "level", "msg",
// then the fields; a field named time, level or msg becomes field.<name>}.
std::string JsonLogLine(std::chrono::system_clock::time_point time, const std::string& level,
                        const std::string& text);

// Sets spdlog's level and format; kInvalidArgument for an unknown level or format.
[[nodiscard]] Status ConfigureLogging(const std::string& level, const std::string& format);

}  // namespace stasis
