// The control channel's server: one thread, started the first time the workload makes memory
// the library tracks (never from a constructor, which would run before the program's own
// initialisation and in every process the variable reaches, CUDA or not).
#pragma once

// Starts the listener thread once per process; later calls return at once. Logs and gives up
// (the process then simply has no fast path) when the socket cannot be made.
void ControlEnsureStarted(void);
