// Formats one error line; see report.h.
#include "report.h"

#include <stdarg.h>
#include <stdio.h>

int ReportError(int exit_code, const char* format, ...) {
  char line[1024];
  va_list args;
  va_start(args, format);
  vsnprintf(line, sizeof line, format, args);
  va_end(args);
  for (char* c = line; *c != '\0'; c++) {
    if (*c == '\n' || *c == '\r') *c = ' ';
  }
  fprintf(stderr, "stasis-cuda-checkpoint: %s\n", line);
  return exit_code;
}
