#include "runtimes/gpu/nvml.h"

#include <dlfcn.h>

#include <future>
#include <memory>
#include <thread>

namespace stasis {
namespace {

// NVML's C ABI, as nvml.h declares it (the header is not a Debian package here, and only
// these few entry points are needed). nvmlDevice_t is an opaque pointer.
using NvmlReturn = int;
using NvmlDevice = void*;
constexpr NvmlReturn kNvmlSuccess = 0;
constexpr unsigned kNvmlBufferSize = 96;  // NVML_DEVICE_UUID_V2/NAME_V2_BUFFER_SIZE (80 for the driver version)

struct NvmlApi {
  NvmlReturn (*init)();
  NvmlReturn (*shutdown)();
  const char* (*error_string)(NvmlReturn);
  NvmlReturn (*device_count)(unsigned*);
  NvmlReturn (*device_by_index)(unsigned, NvmlDevice*);
  NvmlReturn (*device_uuid)(NvmlDevice, char*, unsigned);
  NvmlReturn (*device_name)(NvmlDevice, char*, unsigned);
  NvmlReturn (*driver_version)(char*, unsigned);
  NvmlReturn (*cuda_driver_version)(int*);
};

template <typename Fn>
bool Bind(void* handle, const char* symbol, Fn& out) {
  out = reinterpret_cast<Fn>(dlsym(handle, symbol));
  return out != nullptr;
}

Result<NvmlApi> BindApi(void* handle, const std::string& library) {
  NvmlApi api{};
  for (const auto& [symbol, ok] : std::initializer_list<std::pair<const char*, bool>>{
           {"nvmlInit_v2", Bind(handle, "nvmlInit_v2", api.init)},
           {"nvmlShutdown", Bind(handle, "nvmlShutdown", api.shutdown)},
           {"nvmlErrorString", Bind(handle, "nvmlErrorString", api.error_string)},
           {"nvmlDeviceGetCount_v2", Bind(handle, "nvmlDeviceGetCount_v2", api.device_count)},
           {"nvmlDeviceGetHandleByIndex_v2", Bind(handle, "nvmlDeviceGetHandleByIndex_v2", api.device_by_index)},
           {"nvmlDeviceGetUUID", Bind(handle, "nvmlDeviceGetUUID", api.device_uuid)},
           {"nvmlDeviceGetName", Bind(handle, "nvmlDeviceGetName", api.device_name)},
           {"nvmlSystemGetDriverVersion", Bind(handle, "nvmlSystemGetDriverVersion", api.driver_version)},
           {"nvmlSystemGetCudaDriverVersion_v2",
            Bind(handle, "nvmlSystemGetCudaDriverVersion_v2", api.cuda_driver_version)}}) {
    if (!ok) return Status(Code::kUnavailable, "GPU discovery: " + library + " has no " + symbol);
  }
  return api;
}

Status NvmlError(const NvmlApi& api, const char* call, NvmlReturn r) {
  const char* text = api.error_string ? api.error_string(r) : nullptr;
  return Status(Code::kUnavailable, std::string("GPU discovery: ") + call + " failed: " +
                                        (text ? text : "error " + std::to_string(r)));
}

// Every GPU NVML lists, between nvmlInit and nvmlShutdown.
Result<GpuInventory> ListDevices(const NvmlApi& api) {
  unsigned count = 0;
  if (NvmlReturn r = api.device_count(&count); r != kNvmlSuccess) return NvmlError(api, "nvmlDeviceGetCount", r);
  if (count == 0) return Status(Code::kUnavailable, "GPU discovery: NVML lists no GPU");
  GpuInventory inv;
  inv.source = "nvml";
  char buf[kNvmlBufferSize] = {};
  if (NvmlReturn r = api.driver_version(buf, sizeof buf); r != kNvmlSuccess) {
    return NvmlError(api, "nvmlSystemGetDriverVersion", r);
  }
  inv.driver_version = buf;
  int cuda = 0;
  if (NvmlReturn r = api.cuda_driver_version(&cuda); r != kNvmlSuccess) {
    return NvmlError(api, "nvmlSystemGetCudaDriverVersion", r);
  }
  inv.cuda_version = FormatCudaDriverVersion(cuda);
  for (unsigned i = 0; i < count; ++i) {
    NvmlDevice device = nullptr;
    if (NvmlReturn r = api.device_by_index(i, &device); r != kNvmlSuccess) {
      return NvmlError(api, "nvmlDeviceGetHandleByIndex", r);
    }
    DiscoveredGpu gpu;
    if (NvmlReturn r = api.device_uuid(device, buf, sizeof buf); r != kNvmlSuccess) {
      return NvmlError(api, "nvmlDeviceGetUUID", r);
    }
    gpu.uuid = buf;
    if (NvmlReturn r = api.device_name(device, buf, sizeof buf); r != kNvmlSuccess) {
      return NvmlError(api, "nvmlDeviceGetName", r);
    }
    gpu.model = buf;
    inv.gpus.push_back(std::move(gpu));
  }
  return inv;
}

Result<GpuInventory> Discover(const std::string& library) {
  // RTLD_LOCAL: NVML's symbols stay out of the agent's namespace. Never dlclosed: NVML starts
  // threads of its own, and the agent asks once.
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return Status(Code::kNotFound, "GPU discovery: cannot load " + library + ": " + (why ? why : "unknown error"));
  }
  auto api = BindApi(handle, library);
  if (!api.ok()) return api.status();
  if (NvmlReturn r = api->init(); r != kNvmlSuccess) return NvmlError(*api, "nvmlInit", r);
  auto inv = ListDevices(*api);
  api->shutdown();
  return inv;
}

}  // namespace

std::string FormatCudaDriverVersion(int version) {
  if (version <= 0) return "";
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

Result<GpuInventory> DiscoverGpusWithNvml(const std::string& library, std::chrono::milliseconds deadline) {
  // On its own thread, so that a driver that hangs in nvmlInit cannot hang the agent's start;
  // on a timeout the thread is left to finish (or not) on its own.
  auto result = std::make_shared<std::promise<Result<GpuInventory>>>();
  std::future<Result<GpuInventory>> done = result->get_future();
  std::thread([library, result] { result->set_value(Discover(library)); }).detach();
  if (done.wait_for(deadline) != std::future_status::ready) {
    return Status(Code::kDeadlineExceeded, "GPU discovery: NVML (" + library + ") did not answer within " +
                                               std::to_string(deadline.count()) + " ms");
  }
  return done.get();
}

}  // namespace stasis
