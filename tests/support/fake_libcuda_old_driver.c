// TEST STAND-IN, NOT A DRIVER. Built by the tests as libcuda.so.1 in its own directory
// (build/tests/fake-libcuda-r550/) so that stasis-cuda-checkpoint, run with LD_LIBRARY_PATH
// pointing there, meets a "driver" that reports CUDA 12.4 (R550), older than the R570 the
// checkpoint API needs. It exports only what the helper calls before refusing an old driver;
// it does nothing else and never touches a GPU. Used by tests/unit/cuda_checkpoint_cli_test.cc.
typedef int CUresult;

CUresult cuDriverGetVersion(int* version) {
  *version = 12040;  // CUDA 12.4, the driver API version R550 reports
  return 0;
}

CUresult cuInit(unsigned int flags) {
  (void)flags;
  return 0;
}

CUresult cuGetErrorString(CUresult error, const char** text) {
  (void)error;
  *text = "stand-in error";
  return 0;
}
