// The allocation table behind one mutex; see registry.h.
#define _GNU_SOURCE

#include "registry.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
static Registry registry;

Registry* RegistryLock(void) {
  pthread_mutex_lock(&mutex);
  return &registry;
}

void RegistryUnlock(void) { pthread_mutex_unlock(&mutex); }

static void MarkLocked(const char* format, va_list args) {
  if (registry.unsupported[0] == '\0') {
    vsnprintf(registry.unsupported, sizeof registry.unsupported, format, args);
  }
}

void RegistryMarkUnsupported(const char* format, ...) {
  va_list args;
  va_start(args, format);
  pthread_mutex_lock(&mutex);
  MarkLocked(format, args);
  pthread_mutex_unlock(&mutex);
  va_end(args);
}

int RegistryUnsupported(char* why, size_t n) {
  pthread_mutex_lock(&mutex);
  const int unsupported = registry.unsupported[0] != '\0';
  if (unsupported && why != NULL) snprintf(why, n, "%s", registry.unsupported);
  pthread_mutex_unlock(&mutex);
  return unsupported;
}

static void Mark(const char* format, ...) __attribute__((format(printf, 1, 2)));
static void Mark(const char* format, ...) {
  va_list args;
  va_start(args, format);
  MarkLocked(format, args);
  va_end(args);
}

// Stage copies in one context: memory in a second one would need its own synchronisation
// and its own restore ordering, which the fast path does not attempt.
static void CheckContext(CUcontext ctx) {
  if (ctx == NULL) Mark("device memory allocated with no current context");
  for (size_t i = 0; i < registry.count; i++) {
    if (registry.items[i].ctx != ctx) {
      Mark("tracked device memory in more than one context");
      return;
    }
  }
}

static Allocation* Append(void) {
  if (registry.count == registry.capacity) {
    size_t capacity = registry.capacity == 0 ? 64 : registry.capacity * 2;
    Allocation* items = realloc(registry.items, capacity * sizeof *items);
    if (items == NULL) {
      Mark("out of host memory for the allocation table");
      return NULL;
    }
    registry.items = items;
    registry.capacity = capacity;
  }
  Allocation* a = &registry.items[registry.count++];
  memset(a, 0, sizeof *a);
  return a;
}

static void Remove(Allocation* a) {
  *a = registry.items[--registry.count];
}

void RegistryAddServed(CUdeviceptr addr, size_t size, CUmemGenericAllocationHandle handle,
                       const CUmemAllocationProp* prop, CUcontext ctx) {
  pthread_mutex_lock(&mutex);
  CheckContext(ctx);
  Allocation* a = Append();
  if (a != NULL) {
    *a = (Allocation){.addr = addr, .size = size, .handle = handle, .prop = *prop, .ctx = ctx,
                      .served = 1, .present = 1, .access_count = 1};
    a->access[0] = (CUmemAccessDesc){.location = prop->location,
                                     .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
  }
  pthread_mutex_unlock(&mutex);
}

int RegistryTakeServed(CUdeviceptr addr, Allocation* out) {
  pthread_mutex_lock(&mutex);
  int found = 0;
  for (size_t i = 0; i < registry.count && !found; i++) {
    if (registry.items[i].served && registry.items[i].addr == addr) {
      *out = registry.items[i];
      Remove(&registry.items[i]);
      found = 1;
    }
  }
  pthread_mutex_unlock(&mutex);
  return found;
}

void RegistryCreated(CUmemGenericAllocationHandle handle, size_t size,
                     const CUmemAllocationProp* prop, CUcontext ctx) {
  pthread_mutex_lock(&mutex);
  CheckContext(ctx);
  Allocation* a = Append();
  if (a != NULL) {
    *a = (Allocation){.size = size, .id = handle, .handle = handle, .prop = *prop, .ctx = ctx,
                      .present = 1};
  }
  pthread_mutex_unlock(&mutex);
}

static Allocation* FindId(CUmemGenericAllocationHandle id) {
  for (size_t i = 0; i < registry.count; i++) {
    if (!registry.items[i].served && registry.items[i].id == id) return &registry.items[i];
  }
  return NULL;
}

void RegistryMapped(CUdeviceptr addr, size_t size, size_t offset, CUmemGenericAllocationHandle id) {
  pthread_mutex_lock(&mutex);
  Allocation* a = FindId(id);
  // Stage puts back whole handles at one address each; anything finer would need the
  // mapping layout replayed.
  if (a == NULL) {
    Mark("cuMemMap of an allocation handle not made by cuMemCreate in this process");
  } else if (a->addr != 0 || offset != 0 || size != a->size) {
    Mark("an allocation handle mapped in part or at more than one address");
  } else {
    a->addr = addr;
  }
  pthread_mutex_unlock(&mutex);
}

void RegistryAccessSet(CUdeviceptr addr, size_t size, const CUmemAccessDesc* desc, size_t count) {
  pthread_mutex_lock(&mutex);
  for (size_t i = 0; i < registry.count; i++) {
    Allocation* a = &registry.items[i];
    if (a->served || a->addr == 0 || a->addr + a->size <= addr || addr + size <= a->addr) continue;
    if (a->addr < addr || a->addr + a->size > addr + size) {
      Mark("cuMemSetAccess over part of a mapped allocation");
    } else if (count > kMaxAccessDescs) {
      Mark("cuMemSetAccess with more than %d access descriptors", kMaxAccessDescs);
    } else {
      memcpy(a->access, desc, count * sizeof *desc);
      a->access_count = count;
    }
  }
  pthread_mutex_unlock(&mutex);
}

void RegistryUnmapped(CUdeviceptr addr, size_t size) {
  pthread_mutex_lock(&mutex);
  for (size_t i = 0; i < registry.count;) {
    Allocation* a = &registry.items[i];
    if (a->served || a->addr == 0 || a->addr < addr || a->addr + a->size > addr + size) {
      i++;
      continue;
    }
    a->addr = 0;
    a->access_count = 0;
    if (a->user_released) {
      Remove(a);  // the driver freed it with the unmap
    } else {
      i++;
    }
  }
  pthread_mutex_unlock(&mutex);
}

CUmemGenericAllocationHandle RegistryReleased(CUmemGenericAllocationHandle id) {
  pthread_mutex_lock(&mutex);
  Allocation* a = FindId(id);
  CUmemGenericAllocationHandle real = a != NULL ? a->handle : id;
  if (a != NULL && a->addr != 0) {
    a->user_released = 1;
  } else if (a != NULL) {
    Remove(a);
  }
  pthread_mutex_unlock(&mutex);
  return real;
}

CUmemGenericAllocationHandle RegistryRealHandle(CUmemGenericAllocationHandle id) {
  pthread_mutex_lock(&mutex);
  Allocation* a = FindId(id);
  CUmemGenericAllocationHandle real = a != NULL ? a->handle : id;
  pthread_mutex_unlock(&mutex);
  return real;
}

int RegistryTracks(CUdeviceptr addr, size_t size) {
  pthread_mutex_lock(&mutex);
  int tracks = 0;
  for (size_t i = 0; i < registry.count && !tracks; i++) {
    const Allocation* a = &registry.items[i];
    tracks = a->addr != 0 && a->addr < addr + size && addr < a->addr + a->size;
  }
  pthread_mutex_unlock(&mutex);
  return tracks;
}
