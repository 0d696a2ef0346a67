// How the runtime API reaches the wrappers. CUDA 12+'s libcudart opens libcuda.so.1 itself,
// finds cuGetProcAddress with dlsym on that handle (which LD_PRELOAD does not interpose) and
// asks it for every other entry point. So the library exports dlsym, answering the
// cuGetProcAddress names with its own, and its cuGetProcAddress hands out the wrapper of
// whichever variant the driver chose (by version and per-thread-stream flags): the driver's
// answer is compared with the driver's exported definitions of the wrapped names.
//
// An answer that matches none of them for a name the library wraps (a variant newer than this
// table, or a legacy 32-bit one), or any answer for a name it does not know that may touch
// device memory, cannot be gated or tracked: it is handed out behind a trampoline that marks
// the process unsupported when it is called (ungated.h).
#define _GNU_SOURCE

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#include "interpose.h"
#include "registry.h"
#include "ungated.h"

typedef CUresult (*GetProcV1)(const char*, void**, int, cuuint64_t);
typedef CUresult (*GetProcV2)(const char*, void**, int, cuuint64_t,
                              CUdriverProcAddressQueryResult*);

enum { kMaxExports = 256 };
static Export all[kMaxExports];
static void* real_of[kMaxExports];
static size_t all_count;
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void Collect(const Export* (*table)(size_t*)) {
  size_t count = 0;
  const Export* exports = table(&count);
  for (size_t i = 0; i < count && all_count < kMaxExports; i++) {
    all[all_count] = exports[i];
    real_of[all_count] = RealSymbol(exports[i].name);
    all_count++;
  }
}

static void BuildTable(void) {
  Collect(AllocExports);
  Collect(FallbackExports);
  Collect(GatedExports);
  Collect(ProcExports);
}

// The name without its _ptds/_ptsz and _vN suffixes: "cuMemcpyHtoD_v2_ptds" -> "cuMemcpyHtoD".
static size_t BaseLength(const char* name) {
  size_t len = strlen(name);
  if (len > 5 && (strcmp(name + len - 5, "_ptds") == 0 || strcmp(name + len - 5, "_ptsz") == 0)) {
    len -= 5;
  }
  size_t digits = len;
  while (digits > 0 && name[digits - 1] >= '0' && name[digits - 1] <= '9') digits--;
  if (digits < len && digits >= 2 && name[digits - 1] == 'v' && name[digits - 2] == '_') {
    len = digits - 2;
  }
  return len;
}

static int SameBase(const char* a, const char* b) {
  size_t la = BaseLength(a), lb = BaseLength(b);
  return la == lb && strncmp(a, b, la) == 0;
}

static void* Wrap(const char* symbol, void* real, int version, cuuint64_t flags) {
  pthread_once(&table_once, BuildTable);
  int wrapped_base = 0;
  for (size_t i = 0; i < all_count; i++) {
    if (real == all[i].wrapper) return real;  // the driver looked the name up through our dlsym
    if (real == real_of[i]) return all[i].wrapper;
    wrapped_base = wrapped_base || SameBase(symbol, all[i].name);
  }
  if (!wrapped_base && !UngatedMayTouchDeviceMemory(symbol)) return real;
  // Every such name on its own line, so one run on a new driver or runtime names all that a
  // newer table needs.
  const char* what = wrapped_base ? "a variant the library does not wrap"
                                  : "an entry point the library does not know";
  void* trampoline = UngatedTrampoline(symbol, real);
  if (trampoline != NULL) {
    FastsnapLog("cuGetProcAddress(%s, version %d, flags %llu): %s; a call takes the process to "
                "the plain path", symbol, version, (unsigned long long)flags, what);
    return trampoline;
  }
  FastsnapLog("cuGetProcAddress(%s, version %d, flags %llu): %s", symbol, version,
              (unsigned long long)flags, what);
  RegistryMarkUnsupported("cuGetProcAddress(%s, version %d, flags %llu) returned %s", symbol,
                          version, flags, what);
  return real;
}

FASTSNAP_EXPORT CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int version,
                                             cuuint64_t flags,
                                             CUdriverProcAddressQueryResult* status) {
  REAL_FN(real, "cuGetProcAddress_v2",
          (const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*));
  if (real == NULL) return CUDA_ERROR_NOT_FOUND;
  CUresult result = real(symbol, pfn, version, flags, status);
  if (result == CUDA_SUCCESS && pfn != NULL && *pfn != NULL) {
    *pfn = Wrap(symbol, *pfn, version, flags);
  }
  return result;
}

FASTSNAP_EXPORT CUresult cuGetProcAddress(const char* symbol, void** pfn, int version,
                                          cuuint64_t flags) {
  REAL_FN(real, "cuGetProcAddress", (const char*, void**, int, cuuint64_t));
  if (real == NULL) return CUDA_ERROR_NOT_FOUND;
  CUresult result = real(symbol, pfn, version, flags);
  if (result == CUDA_SUCCESS && pfn != NULL && *pfn != NULL) {
    *pfn = Wrap(symbol, *pfn, version, flags);
  }
  return result;
}

// Everything but the two cuGetProcAddress names goes to glibc's dlsym. Those two are answered
// with ours only where the handle really has them (a libcuda handle), so a lookup elsewhere
// still fails as it would. RTLD_NEXT is resolved relative to our caller, as glibc would have:
// another interposer's dlsym(RTLD_NEXT, "malloc") must not find its own definition again.
FASTSNAP_EXPORT void* dlsym(void* handle, const char* name) {
  void* found = handle == RTLD_NEXT ? RealDlsymNext(__builtin_return_address(0), name)
                                    : RealDlsym(handle, name);
  if (found == NULL) return found;
  if (strcmp(name, "cuGetProcAddress_v2") == 0) return (void*)cuGetProcAddress_v2;
  if (strcmp(name, "cuGetProcAddress") == 0) return (void*)cuGetProcAddress;
  return found;
}

static const Export kProc[] = {
    {"cuGetProcAddress_v2", (void*)cuGetProcAddress_v2},
    {"cuGetProcAddress", (void*)cuGetProcAddress},
};

const Export* ProcExports(size_t* count) {
  *count = sizeof kProc / sizeof kProc[0];
  return kProc;
}
