// The helper's one error format: a single line on stderr, "stasis-cuda-checkpoint: <reason>".
// runsc folds the helper's output into its own error text and logs, so a reason must never
// span lines; newlines in the reason (from an argv value, say) are flattened to spaces.
#pragma once

// Prints the reason and returns `exit_code`, so callers can `return ReportError(...)`.
int ReportError(int exit_code, const char* format, ...) __attribute__((format(printf, 2, 3)));
