// kevolve's slim stand-in for <torch/types.h> in CUDA sources: the same as its <torch/extension.h>.
#pragma once
#include <torch/extension.h>
