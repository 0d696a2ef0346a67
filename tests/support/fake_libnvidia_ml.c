// TEST STAND-IN, NOT A DRIVER. Built by the tests as libnvidia-ml.so.1 in its own directory
// (build/tests/fake-libnvidia-ml/) so that GPU discovery through NVML (runtimes/gpu/nvml.cc)
// runs here, where no NVIDIA driver is: it answers the nine entry points the agent calls, with
// NVML's signatures and return codes. Real NVML is exercised on a GPU (docs/gpu-e2e-results.md).
//
// Controlled by environment variables, read at every call:
//   FAKE_NVML_GPUS    "<uuid>=<name>;<uuid>=<name>…" (default: none, so the count is 0)
//   FAKE_NVML_DRIVER  nvmlSystemGetDriverVersion's answer (default 580.95.05)
//   FAKE_NVML_CUDA    nvmlSystemGetCudaDriverVersion_v2's answer (default 13000)
//   FAKE_NVML_INIT    a return code for nvmlInit_v2 (e.g. 9, NVML_ERROR_DRIVER_NOT_LOADED)
//   FAKE_NVML_HANG    set: nvmlInit_v2 sleeps for an hour (a wedged driver)
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int nvmlReturn_t;
typedef struct FakeDevice* nvmlDevice_t;
struct FakeDevice {
  char uuid[96];
  char name[96];
};

enum { kSuccess = 0, kInvalidArgument = 2, kInsufficientSize = 7, kDriverNotLoaded = 9 };
static struct FakeDevice g_devices[16];

static const char* Env(const char* name, const char* fallback) {
  const char* v = getenv(name);
  return v && *v ? v : fallback;
}

// Parses FAKE_NVML_GPUS into g_devices; returns the count.
static unsigned Devices(void) {
  char list[2048];
  snprintf(list, sizeof list, "%s", Env("FAKE_NVML_GPUS", ""));
  unsigned n = 0;
  char* save = NULL;
  for (char* item = strtok_r(list, ";", &save); item && n < 16; item = strtok_r(NULL, ";", &save)) {
    char* eq = strchr(item, '=');
    if (!eq) continue;
    *eq = '\0';
    snprintf(g_devices[n].uuid, sizeof g_devices[n].uuid, "%s", item);
    snprintf(g_devices[n].name, sizeof g_devices[n].name, "%s", eq + 1);
    ++n;
  }
  return n;
}

static nvmlReturn_t Copy(const char* value, char* out, unsigned length) {
  if (!out) return kInvalidArgument;
  if (strlen(value) + 1 > length) return kInsufficientSize;
  memcpy(out, value, strlen(value) + 1);
  return kSuccess;
}

nvmlReturn_t nvmlInit_v2(void) {
  if (getenv("FAKE_NVML_HANG")) sleep(3600);
  return atoi(Env("FAKE_NVML_INIT", "0"));
}

nvmlReturn_t nvmlShutdown(void) { return kSuccess; }

const char* nvmlErrorString(nvmlReturn_t r) {
  switch (r) {
    case kSuccess:
      return "Success";
    case kDriverNotLoaded:
      return "Driver Not Loaded";
    case kInsufficientSize:
      return "Insufficient Size";
    default:
      return "Unknown Error";
  }
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned* count) {
  if (!count) return kInvalidArgument;
  *count = Devices();
  return kSuccess;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned index, nvmlDevice_t* device) {
  if (!device || index >= Devices()) return kInvalidArgument;
  *device = &g_devices[index];
  return kSuccess;
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char* uuid, unsigned length) {
  return device ? Copy(device->uuid, uuid, length) : kInvalidArgument;
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char* name, unsigned length) {
  return device ? Copy(device->name, name, length) : kInvalidArgument;
}

nvmlReturn_t nvmlSystemGetDriverVersion(char* version, unsigned length) {
  return Copy(Env("FAKE_NVML_DRIVER", "580.95.05"), version, length);
}

nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int* version) {
  if (!version) return kInvalidArgument;
  *version = atoi(Env("FAKE_NVML_CUDA", "13000"));
  return kSuccess;
}
