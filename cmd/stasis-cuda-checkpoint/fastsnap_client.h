// The helper's side of the fast-snapshot path (libstasis-fastsnap, fastsnap/protocol.h).
// --toggle asks a process that preloads the library to stage its device memory before the
// lock and to put it back after the unlock; a process without the library has no listener,
// and then the toggle is exactly the plain one. Every exchange has a deadline.
#pragma once

// Before lock + checkpoint. Returns 1 when the process staged (prints "fast-snapshot: staged
// <bytes> bytes in <ms> ms" on stderr), 0 when the plain path should run: no listener (silent),
// or a fallback or a failed exchange (prints "fast-snapshot: fallback: <reason>").
int FastsnapStage(int pid, unsigned int timeout_ms);

// After a lock or checkpoint failed with the process running again: puts the staged memory
// back so it runs on intact. Prints the outcome; returns 1 when the memory is back.
int FastsnapUnstageAfterFailure(int pid, unsigned int timeout_ms);

// After restore + unlock. Returns kExitOk when there is nothing to do or the memory is back
// (printing "fast-snapshot: unstaged …"), else reports the failure and returns kExitCudaError.
int FastsnapUnstage(int pid, unsigned int timeout_ms);
