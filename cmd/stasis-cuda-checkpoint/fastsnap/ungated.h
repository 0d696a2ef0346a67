// Entry points the library cannot gate, handed out through cuGetProcAddress as trampolines
// that make a call to one safe: a variant of a wrapped name newer than the library's table (the
// driver answering cuMemcpyBatchAsync with cuMemcpyBatchAsync_v2), or a name it does not know
// that may write device memory or allocate it (UngatedMayTouchDeviceMemory). Without a
// prototype the library cannot wrap one, but it can stand in front of it: the trampoline
// calls the library with the caller's registers and stack kept, then jumps to the driver's
// definition, which returns to the caller.
//
// A call marks the process unsupported (every later stage falls back) and then waits while the
// gate is closed. That order is what makes it safe. A stage closes and drains the gate before
// it reads the mark: a call that marked before that read makes the stage fall back with every
// allocation in place; a call that marks after it found the gate already closed, and waits
// until the unstage has put every allocation back. Resolving such a name costs nothing:
// cudart 13 resolves every entry point it knows when it starts, used or not.
#pragma once

// The trampoline for `real` (one per driver definition, however often it is asked for), or
// NULL where none can be made: another architecture than x86-64, or every slot taken. Then
// the caller marks the process unsupported at once, as the library did before it had them.
void* UngatedTrampoline(const char* symbol, void* real);

// Whether a name the library does not wrap may write or read device memory, allocate or map it,
// or launch work (cuMemcpy*, cuMemset*, cuLaunch*, cuStreamWaitValue*, cuMemAlloc* but not
// cuMemAllocHost*, …): such a name gets a trampoline.
int UngatedMayTouchDeviceMemory(const char* symbol);
