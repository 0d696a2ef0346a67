// The quiesce gate: every wrapped driver call that writes device memory or launches work
// passes through it, so that staging can hold the workload's threads off the device while its
// memory is copied out and released.
//
// Invariant: while the gate is closed and drained, no workload thread is inside a wrapped call
// and none enters one until GateOpen. The control thread is exempt (GateExemptThisThread), and
// a wrapped call made from inside another one on the same thread passes (the driver or a
// stand-in may call its own exported names).
#pragma once

void GateEnter(void);
void GateLeave(void);

// Closes the gate and waits up to `timeout_ms` for the calls already inside to leave. Returns
// 1 with the gate closed and drained, or 0 with the gate open again (a call stayed inside).
int GateClose(unsigned int timeout_ms);

// Opens the gate and wakes every thread waiting at it.
void GateOpen(void);

// The calling thread never waits at the gate (the control thread: stage and unstage call the
// real driver, never the wrappers, but a driver calling its own exported names would land here).
void GateExemptThisThread(void);
