// What the interposition files share: the export marker (the library is built with hidden
// visibility, so only the driver's names are exported) and each file's table of the names it
// wraps, which cuGetProcAddress consults (interpose_proc.c).
#pragma once

#include <stddef.h>
#include <string.h>

#include "cuda_types.h"
#include "real.h"

#define FASTSNAP_EXPORT __attribute__((visibility("default")))

typedef struct {
  const char* name;  // the driver's exported name, e.g. "cuMemcpyHtoD_v2_ptds"
  void* wrapper;     // the library's definition of that name
} Export;

const Export* AllocExports(size_t* count);     // interpose_alloc.c
const Export* FallbackExports(size_t* count);  // interpose_fallback.c
const Export* GatedExports(size_t* count);     // interpose_gated.c
const Export* ProcExports(size_t* count);      // interpose_proc.c

// Declares `fn` with the prototype `params` and points it at the driver's `name`, resolved
// once; ISO C has no cast from void* to a function pointer, POSIX makes the copy valid.
#define REAL_FN(fn, name, params)                   \
  static void* fn##_slot;                           \
  CUresult(*fn) params;                             \
  do {                                              \
    void* fn##_found = RealCached(&fn##_slot, name); \
    memcpy(&fn, &fn##_found, sizeof fn##_found);    \
  } while (0)
