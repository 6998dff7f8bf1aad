// kevolve's slim stand-in for <ATen/cuda/CUDAContext.h> in CUDA sources: streams, device properties
// and launch checks, without the cuBLAS/cuSPARSE/cuSOLVER headers and ATen/Context.h.
#pragma once
#include <cuda_runtime_api.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/macros/Export.h>

namespace at::cuda {
using c10::cuda::CUDAStream;
using c10::cuda::getCurrentCUDAStream;
using c10::cuda::getDefaultCUDAStream;
using c10::cuda::getStreamFromPool;
using c10::cuda::setCurrentCUDAStream;
using c10::cuda::device_count;
using c10::cuda::current_device;
using c10::cuda::set_device;
TORCH_CUDA_CPP_API cudaDeviceProp* getCurrentDeviceProperties();
TORCH_CUDA_CPP_API cudaDeviceProp* getDeviceProperties(c10::DeviceIndex device);
TORCH_CUDA_CPP_API int warp_size();
}  // namespace at::cuda
