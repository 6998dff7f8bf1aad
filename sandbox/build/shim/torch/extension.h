// kevolve's slim stand-in for <torch/extension.h> in CUDA sources (sandbox/recipe.py).
// A kernel's host wrapper needs the Tensor class, a few factories, dtype names, TORCH_CHECK and the
// current stream, not the whole of ATen, autograd and pybind11 that the real header brings: each of
// nvcc's front end, device compiler and host compiler parses every header again. When something a
// source uses is missing here, the compile fails and the build is repeated with the real header.
#pragma once
// The ATen/ops headers below are kevolve's copies, stripped of ATen/Context.h & co. (recipe.ensure_shim).
#include <ATen/core/Tensor.h>
#include <ATen/Dispatch.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/zeros_like.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/ones_like.h>
#include <ATen/ops/full.h>
#include <ATen/ops/full_like.h>
#include <ATen/ops/arange.h>
#include <c10/core/TensorOptions.h>
#include <c10/util/Exception.h>
#include <optional>

namespace torch {
using namespace at;  // NOLINT - torch::Tensor, torch::empty, torch::kFloat ... as torch/types.h has them
using std::nullopt;  // NOLINT
using std::optional;  // NOLINT
using Dtype = at::ScalarType;
constexpr auto kUInt8 = at::kByte;
constexpr auto kInt8 = at::kChar;
constexpr auto kInt16 = at::kShort;
constexpr auto kInt32 = at::kInt;
constexpr auto kInt64 = at::kLong;
constexpr auto kFloat16 = at::kHalf;
constexpr auto kFloat32 = at::kFloat;
constexpr auto kFloat64 = at::kDouble;
constexpr auto kF16 = kFloat16;
constexpr auto kF32 = kFloat32;
constexpr auto kF64 = kFloat64;
constexpr auto kI32 = kInt32;
constexpr auto kI64 = kInt64;
}  // namespace torch
