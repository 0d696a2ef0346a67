// Finds the real driver and glibc's dlsym. The library exports its own dlsym (interpose_proc.c),
// so every lookup here goes through RealDlsym, never through the name `dlsym`.
#define _GNU_SOURCE

#include "real.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

typedef void* (*DlsymFn)(void*, const char*);

static DlsymFn real_dlsym;
static pthread_once_t dlsym_once = PTHREAD_ONCE_INIT;

// glibc 2.34 moved dlsym into libc under a new version; older ones export only the first
// version of the architecture. Asking for each keeps the library working on either.
static void FindDlsym(void) {
  static const char* const kVersions[] = {"GLIBC_2.34", "GLIBC_2.2.5", "GLIBC_2.17", "GLIBC_2.0"};
  for (size_t i = 0; i < sizeof kVersions / sizeof kVersions[0] && real_dlsym == NULL; i++) {
    void* found = dlvsym(RTLD_NEXT, "dlsym", kVersions[i]);
    memcpy(&real_dlsym, &found, sizeof found);
  }
}

void* RealDlsym(void* handle, const char* name) {
  pthread_once(&dlsym_once, FindDlsym);
  return real_dlsym != NULL ? real_dlsym(handle, name) : NULL;
}

// Walks the link map from the caller's object on; each later object is asked through its own
// handle, and its answer counts only if the definition is that object's own (a handle's
// lookup also searches the object's dependencies, which may come earlier in load order).
void* RealDlsymNext(const void* caller, const char* name) {
  Dl_info info;
  struct link_map* map = NULL;
  if (dladdr1(caller, &info, (void**)&map, RTLD_DL_LINKMAP) == 0 || map == NULL) return NULL;
  for (map = map->l_next; map != NULL; map = map->l_next) {
    void* handle = map->l_name[0] != '\0' ? dlopen(map->l_name, RTLD_LAZY | RTLD_NOLOAD) : NULL;
    if (handle == NULL) continue;
    void* found = RealDlsym(handle, name);
    dlclose(handle);
    struct link_map* owner = NULL;
    if (found != NULL && dladdr1(found, &info, (void**)&owner, RTLD_DL_LINKMAP) != 0 &&
        owner == map) {
      return found;
    }
  }
  return NULL;
}

void FastsnapLog(const char* format, ...) {
  char line[512];
  va_list args;
  va_start(args, format);
  vsnprintf(line, sizeof line, format, args);
  va_end(args);
  fprintf(stderr, "libstasis-fastsnap: %s\n", line);
}

static void* driver_handle;
static pthread_once_t handle_once = PTHREAD_ONCE_INIT;

static void OpenDriver(void) {
  // RTLD_LOCAL as cudart opens it; the process has it loaded by the time any wrapper runs, so
  // this only takes a reference.
  driver_handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (driver_handle == NULL) FastsnapLog("cannot load libcuda.so.1: %s", dlerror());
}

void* RealSymbol(const char* name) {
  pthread_once(&handle_once, OpenDriver);
  return driver_handle != NULL ? RealDlsym(driver_handle, name) : NULL;
}

static RealDriver driver;
static int driver_ok;
static pthread_once_t driver_once = PTHREAD_ONCE_INIT;

static void LoadDriver(void) {
  static const struct {
    const char* name;
    size_t offset;
  } kEntries[] = {
#define ENTRY(name) {#name, offsetof(RealDriver, name)}
      ENTRY(cuCtxGetCurrent),      ENTRY(cuCtxSetCurrent),      ENTRY(cuCtxGetDevice),
      ENTRY(cuCtxSynchronize),     ENTRY(cuMemGetAllocationGranularity),
      ENTRY(cuMemAddressReserve),  ENTRY(cuMemAddressFree),     ENTRY(cuMemCreate),
      ENTRY(cuMemRelease),         ENTRY(cuMemMap),             ENTRY(cuMemUnmap),
      ENTRY(cuMemSetAccess),       ENTRY(cuMemAlloc_v2),        ENTRY(cuMemFree_v2),
      ENTRY(cuMemHostAlloc),       ENTRY(cuMemFreeHost),        ENTRY(cuMemcpyDtoHAsync_v2),
      ENTRY(cuMemcpyHtoDAsync_v2), ENTRY(cuStreamCreate),       ENTRY(cuStreamSynchronize),
#undef ENTRY
  };
  for (size_t i = 0; i < sizeof kEntries / sizeof kEntries[0]; i++) {
    void* symbol = RealSymbol(kEntries[i].name);
    if (symbol == NULL) {
      FastsnapLog("libcuda.so.1 lacks %s; device memory is left to the driver's checkpoint",
                  kEntries[i].name);
      return;
    }
    memcpy((char*)&driver + kEntries[i].offset, &symbol, sizeof symbol);
  }
  driver_ok = 1;
}

const RealDriver* RealDriverGet(void) {
  pthread_once(&driver_once, LoadDriver);
  return driver_ok ? &driver : NULL;
}

void* RealCached(void** slot, const char* name) {
  void* found = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
  if (found == NULL) {
    found = RealSymbol(name);
    __atomic_store_n(slot, found, __ATOMIC_RELEASE);
  }
  return found;
}
