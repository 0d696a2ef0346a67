// Stage and unstage: the two requests that move the tracked device memory to the pinned host
// arena and back, and the status request. Each writes its one-line reply (no newline) into
// `reply`; control.c sends it.
//
// Invariant: a stage either leaves every tracked allocation released with its bytes in the
// arena and the gate closed ("staged"), or leaves the process as it found it with the gate
// open ("fallback"). An unstage that fails leaves the gate closed and the stage in place, so a
// later unstage can try again; the workload never runs on memory that is not there.
#pragma once

#include <stddef.h>

void StageRequest(char* reply, size_t reply_size);
void UnstageRequest(char* reply, size_t reply_size);
void StatusRequest(char* reply, size_t reply_size);
