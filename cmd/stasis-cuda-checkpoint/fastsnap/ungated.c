// Trampolines for the entry points the library cannot gate (ungated.h says why and when).
//
// x86-64 only: each of kSlots stubs puts its slot number in %r11 (scratch in the SysV ABI,
// never an argument) and jumps to one common routine. That saves the argument registers (%rdi,
// %rsi, %rdx, %rcx, %r8, %r9, %rax for a variadic call's vector count, %xmm0-%xmm7), calls
// FastsnapUngatedEnter with the slot, restores them and jumps to the address it returned. The
// caller's return address and stack arguments are never touched, so the driver's definition
// runs as if called directly and returns to the caller.
#define _GNU_SOURCE

#include "ungated.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "gate.h"
#include "real.h"
#include "registry.h"

// The stubs' count, spelled once for the assembler and for C.
#define FASTSNAP_SLOTS 256
#define FASTSNAP_STR(x) #x
#define FASTSNAP_XSTR(x) FASTSNAP_STR(x)
enum { kSlots = FASTSNAP_SLOTS, kSlotBytes = 16, kNameBytes = 96 };

#if defined(__x86_64__)
// Each stub is 15 bytes (endbr64, movl $slot, %r11d, jmp rel32) in a 16-byte slot. The stack is
// 16-byte aligned at the call: 8 (return address) + 8 (%rbp) + 56 (seven registers) + 136
// (eight %xmm and 8 of padding) = 208.
__asm__(
    "  .text\n"
    "  .p2align 4\n"
    "  .globl fastsnap_ungated_slots\n"
    "  .hidden fastsnap_ungated_slots\n"
    "fastsnap_ungated_slots:\n"
    "  .set fastsnap_slot, 0\n"
    "  .rept " FASTSNAP_XSTR(FASTSNAP_SLOTS) "\n"
    "  .p2align 4\n"
    "  endbr64\n"
    "  movl $fastsnap_slot, %r11d\n"
    "  jmp fastsnap_ungated_common\n"
    "  .set fastsnap_slot, fastsnap_slot + 1\n"
    "  .endr\n"
    "  .p2align 4\n"
    "fastsnap_ungated_common:\n"
    "  pushq %rbp\n"
    "  movq %rsp, %rbp\n"
    "  pushq %rdi\n"
    "  pushq %rsi\n"
    "  pushq %rdx\n"
    "  pushq %rcx\n"
    "  pushq %r8\n"
    "  pushq %r9\n"
    "  pushq %rax\n"
    "  subq $136, %rsp\n"
    "  movdqu %xmm0, 0(%rsp)\n"
    "  movdqu %xmm1, 16(%rsp)\n"
    "  movdqu %xmm2, 32(%rsp)\n"
    "  movdqu %xmm3, 48(%rsp)\n"
    "  movdqu %xmm4, 64(%rsp)\n"
    "  movdqu %xmm5, 80(%rsp)\n"
    "  movdqu %xmm6, 96(%rsp)\n"
    "  movdqu %xmm7, 112(%rsp)\n"
    "  movl %r11d, %edi\n"
    "  call FastsnapUngatedEnter\n"
    "  movq %rax, %r11\n"
    "  movdqu 0(%rsp), %xmm0\n"
    "  movdqu 16(%rsp), %xmm1\n"
    "  movdqu 32(%rsp), %xmm2\n"
    "  movdqu 48(%rsp), %xmm3\n"
    "  movdqu 64(%rsp), %xmm4\n"
    "  movdqu 80(%rsp), %xmm5\n"
    "  movdqu 96(%rsp), %xmm6\n"
    "  movdqu 112(%rsp), %xmm7\n"
    "  addq $136, %rsp\n"
    "  popq %rax\n"
    "  popq %r9\n"
    "  popq %r8\n"
    "  popq %rcx\n"
    "  popq %rdx\n"
    "  popq %rsi\n"
    "  popq %rdi\n"
    "  popq %rbp\n"
    "  jmp *%r11\n");
extern const char fastsnap_ungated_slots[] __attribute__((visibility("hidden")));
#define FASTSNAP_HAS_TRAMPOLINES 1
#endif

static pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
static void* real_of[kSlots];      // written before the slot is handed out, never changed
static char name_of[kSlots][kNameBytes];
static int called[kSlots];         // the slot's first call was logged and marked
static size_t used;

// Called by the common routine with the slot's number; returns the driver's definition.
__attribute__((used, visibility("hidden"))) void* FastsnapUngatedEnter(unsigned int slot) {
  void* real = __atomic_load_n(&real_of[slot], __ATOMIC_ACQUIRE);
  if (!__atomic_load_n(&called[slot], __ATOMIC_ACQUIRE)) {
    // Marked before the gate is passed: the order ungated.h explains. `called` is set only
    // after the mark, so a thread that finds it set and skips this finds the mark in place.
    RegistryMarkUnsupported("%s called: an entry point the library does not gate", name_of[slot]);
    if (!__atomic_exchange_n(&called[slot], 1, __ATOMIC_ACQ_REL)) {
      FastsnapLog("%s called: an entry point the library does not gate; the process takes the "
                  "plain path from now on", name_of[slot]);
    }
  }
  // Waits while a stage holds the gate; the driver's definition then runs outside it.
  GateEnter();
  GateLeave();
  return real;
}

void* UngatedTrampoline(const char* symbol, void* real) {
#ifdef FASTSNAP_HAS_TRAMPOLINES
  pthread_mutex_lock(&mutex);
  size_t slot = 0;
  while (slot < used && real_of[slot] != real) slot++;
  if (slot == used && used < kSlots) {
    snprintf(name_of[slot], kNameBytes, "%s", symbol);
    __atomic_store_n(&real_of[slot], real, __ATOMIC_RELEASE);
    used++;
  }
  pthread_mutex_unlock(&mutex);
  return slot < kSlots ? (void*)(fastsnap_ungated_slots + slot * kSlotBytes) : NULL;
#else
  (void)symbol, (void)real;
  return NULL;
#endif
}

static int HasPrefix(const char* symbol, const char* prefix) {
  return strncmp(symbol, prefix, strlen(prefix)) == 0;
}

int UngatedMayTouchDeviceMemory(const char* symbol) {
  // Copies, sets, launches (graphs too) and stream memory operations write or read device
  // memory; allocations, frees, mappings and imports make or unmake memory the registry would
  // not know. Pinned host memory is none of the fast path's business, and pools, IPC events and
  // multicast queries touch no memory by themselves (what allocates from them is wrapped).
  static const char* const kHost[] = {"cuMemAllocHost", "cuMemFreeHost"};
  static const char* const kPrefixes[] = {
      "cuMemcpy",  "cuMemset",   "cuLaunch",   "cuGraphLaunch", "cuStreamWriteValue",
      "cuStreamWaitValue", "cuStreamBatchMemOp", "cuMemAlloc", "cuMemFree", "cuMemCreate",
      "cuMemRelease", "cuMemMap", "cuMemUnmap", "cuMemImport", "cuMemPrefetch", "cuMemDiscard",
      "cuImportExternalMemory",
  };
  for (size_t i = 0; i < sizeof kHost / sizeof kHost[0]; i++) {
    if (HasPrefix(symbol, kHost[i])) return 0;
  }
  for (size_t i = 0; i < sizeof kPrefixes / sizeof kPrefixes[0]; i++) {
    if (HasPrefix(symbol, kPrefixes[i])) return 1;
  }
  return 0;
}
