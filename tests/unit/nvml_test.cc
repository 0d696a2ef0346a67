// GPU discovery through NVML, against the test stand-in for libnvidia-ml.so.1
// (tests/support/fake_libnvidia_ml.c): what each NVML answer becomes, and how each failure is
// reported. The real library is exercised on a GPU.
#include "runtimes/gpu/nvml.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <cstdio>

#include "runtimes/gpu/gpu_discovery.h"

namespace stasis {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

const std::string kFake = std::string(STASIS_BINARY_DIR) + "/tests/fake-libnvidia-ml/libnvidia-ml.so.1";

class NvmlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* v : {"FAKE_NVML_GPUS", "FAKE_NVML_DRIVER", "FAKE_NVML_CUDA", "FAKE_NVML_INIT", "FAKE_NVML_HANG"}) {
      unsetenv(v);
    }
  }
};

TEST_F(NvmlTest, ListsEveryGpuWithItsModelAndTheDriver) {
  setenv("FAKE_NVML_GPUS", "GPU-aaaa=NVIDIA H200;GPU-bbbb=NVIDIA H100 80GB HBM3", 1);
  setenv("FAKE_NVML_DRIVER", "580.159.04", 1);
  setenv("FAKE_NVML_CUDA", "13000", 1);
  auto inv = DiscoverGpusWithNvml(kFake);
  ASSERT_TRUE(inv.ok()) << inv.status().ToString();
  ASSERT_EQ(inv->gpus.size(), 2u);
  EXPECT_EQ(inv->gpus[0].uuid, "GPU-aaaa");
  EXPECT_EQ(inv->gpus[0].model, "NVIDIA H200");
  EXPECT_EQ(inv->gpus[1].model, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(inv->driver_version, "580.159.04");
  EXPECT_EQ(inv->cuda_version, "13.0");
  EXPECT_EQ(inv->source, "nvml");
}

TEST_F(NvmlTest, NoGpuIsUnavailable) {
  auto inv = DiscoverGpusWithNvml(kFake);
  EXPECT_EQ(inv.status().code(), Code::kUnavailable);
  EXPECT_THAT(inv.status().message(), HasSubstr("NVML lists no GPU"));
}

TEST_F(NvmlTest, AnInitErrorIsReportedWithNvmlsOwnText) {
  setenv("FAKE_NVML_GPUS", "GPU-aaaa=NVIDIA H200", 1);
  setenv("FAKE_NVML_INIT", "9", 1);
  auto inv = DiscoverGpusWithNvml(kFake);
  EXPECT_EQ(inv.status().code(), Code::kUnavailable);
  EXPECT_THAT(inv.status().message(), HasSubstr("nvmlInit failed: Driver Not Loaded"));
}

TEST_F(NvmlTest, AWedgedDriverMeetsTheDeadline) {
  setenv("FAKE_NVML_HANG", "1", 1);
  const auto start = std::chrono::steady_clock::now();
  auto inv = DiscoverGpusWithNvml(kFake, 300ms);
  EXPECT_EQ(inv.status().code(), Code::kDeadlineExceeded);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  unsetenv("FAKE_NVML_HANG");  // the abandoned call sleeps on; later calls must not
}

TEST_F(NvmlTest, AMissingLibraryIsNotFoundAndFallsBackToTheOtherSources) {
  auto inv = DiscoverGpusWithNvml("/nonexistent/libnvidia-ml.so.1");
  EXPECT_EQ(inv.status().code(), Code::kNotFound);
  // The fallback runs the tool: a script that prints what nvidia-smi's query prints.
  const std::string tool = ::testing::TempDir() + "/nvidia-smi";
  FILE* f = fopen(tool.c_str(), "w");
  ASSERT_NE(f, nullptr);
  fputs("#!/bin/sh\n[ \"$1\" = --query-gpu=uuid,name,driver_version ] || exit 9\n"
        "echo 'GPU-cccc, NVIDIA H200, 580.95.05'\n", f);
  fclose(f);
  ASSERT_EQ(chmod(tool.c_str(), 0755), 0);
  GpuDiscoverySources sources;
  sources.nvml_library = "/nonexistent/libnvidia-ml.so.1";
  sources.proc_dir = "/nonexistent/proc";
  sources.nvidia_smi = tool;
  auto fallback = DiscoverGpus(sources);
  ASSERT_TRUE(fallback.ok()) << fallback.status().ToString();
  EXPECT_EQ(fallback->source, "nvidia-smi");
  ASSERT_EQ(fallback->gpus.size(), 1u);
  EXPECT_EQ(fallback->gpus[0].model, "NVIDIA H200");
  // NVML present but failing is not a reason to ask nvidia-smi (it is NVML's own client).
  setenv("FAKE_NVML_INIT", "9", 1);
  sources.nvml_library = kFake;
  EXPECT_EQ(DiscoverGpus(sources).status().code(), Code::kUnavailable);
}

}  // namespace
}  // namespace stasis
