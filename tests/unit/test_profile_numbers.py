"""Achieved bandwidth / roofline arithmetic and the parsing of Nsight Compute's CSV."""

from __future__ import annotations

import pytest

from kevolve.records import KernelLaunch, Profile
from kevolve.sandbox.parent.ncu import parse_csv, summarize
from kevolve.sandbox.judge.roofline import annotate

NCU_CSV = '''==PROF== Connected to process 123
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"
"0","123","python3","127.0.0.1","fused_chain","1","7","(256, 1, 1)","(2112, 1, 1)","0","9.0","Command line profiler metrics","dram__throughput.avg.pct_of_peak_sustained_elapsed","%","90.5"
"0","123","python3","127.0.0.1","fused_chain","1","7","(256, 1, 1)","(2112, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","usecond","60.00"
"0","123","python3","127.0.0.1","fused_chain","1","7","(256, 1, 1)","(2112, 1, 1)","0","9.0","Command line profiler metrics","sm__throughput.avg.pct_of_peak_sustained_elapsed","%","30.0"
"1","123","python3","127.0.0.1","fused_chain_tail","1","7","(256, 1, 1)","(1, 1, 1)","0","9.0","Command line profiler metrics","dram__throughput.avg.pct_of_peak_sustained_elapsed","%","10.0"
"1","123","python3","127.0.0.1","fused_chain_tail","1","7","(256, 1, 1)","(1, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","nsecond","20000"
"1","123","python3","127.0.0.1","fused_chain_tail","1","7","(256, 1, 1)","(1, 1, 1)","0","9.0","Command line profiler metrics","sm__throughput.avg.pct_of_peak_sustained_elapsed","%","5.0"
==PROF== Disconnected from process 123
'''


def test_ncu_csv_is_parsed_per_kernel_and_summarised_by_time() -> None:
    rows = parse_csv(NCU_CSV)
    assert len(rows) == 2
    s = summarize(rows)
    assert s["kernels_profiled"] == 2
    assert s["duration_us"] == pytest.approx(80.0)
    assert s["dram_throughput_pct"] == pytest.approx((90.5 * 60 + 10.0 * 20) / 80)


def test_roofline_fraction_uses_the_nearer_roof() -> None:
    prof = Profile(kernels=(KernelLaunch(name="k", count=1, custom=True),))
    out = annotate(prof, median_ms=0.1, min_bytes=290_000_000, flops=None, device_name="NVIDIA H100 80GB HBM3")
    assert out is not None
    assert out.achieved_gbps == pytest.approx(2900.0)
    assert out.roofline_fraction == pytest.approx(1.0)
    assert annotate(prof, 0.1, 1000, None, "cpu (x86_64)").roofline_fraction is None


def test_a_float32_problems_compute_roof_is_tf32s() -> None:
    """fp32 without tensor cores (51 TFLOP/s) is no roof: cuDNN's TF32 convolutions and 3xTF32 products pass
    tolerance, and level-3 models read 125-250% of it on the H100. 40.4 TFLOP in 0.1 s is 1.0 of TF32's 404."""
    prof = Profile(kernels=(KernelLaunch(name="k", count=1, custom=True),))
    h100 = "NVIDIA H100 80GB HBM3"
    out = annotate(prof, median_ms=100.0, min_bytes=None, flops=40_400_000_000_000, device_name=h100)
    assert out is not None and out.roofline_fraction == pytest.approx(1.0)
    half = annotate(prof, 100.0, None, 40_400_000_000_000, h100, "torch.bfloat16")
    assert half is not None and half.roofline_fraction == pytest.approx(404 / 760)
    assert annotate(prof, 100.0, None, 40_400_000_000_000, h100, "float64").roofline_fraction is None


def test_a_candidates_gemm_kernel_is_its_own_but_cublas_names_are_not() -> None:
    """`gemm_p1_kernel`: a bare `gemm` prefix once made every such kernel cuBLAS's (12 of 14 honest
    level-1 GEMMs `no_custom_kernel` on the H100); cuBLAS's own gemm/gemv kernels stay library ones."""
    from kevolve.sandbox.common.profile import _is_custom

    own = ("gemm_p1", "gemm_p1_kernel", "gemv_kernel", "gemmSN_NN_kernel", "fft_kernel")
    assert _is_custom("gemm_p1_kernel(float const*, float const*, float*, int, int, int)", own)
    assert _is_custom("gemv_kernel(float const*, float*)", own)
    assert _is_custom("void fft_kernel<256>(float2*)", own)
    assert not _is_custom("void gemmSN_NN_kernel<float, 256, 4, 2, 8, 4, 4, false>(cublasGemmSmallNParams<float>)", own)
    assert not _is_custom("sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32", ("sm90_xmma_gemm",))


def test_a_kernel_the_reference_also_runs_is_not_the_candidates() -> None:
    from kevolve.sandbox.config import SandboxConfig
    from kevolve.sandbox.judge.verdict import custom_kernel_rule

    cfg = SandboxConfig(device="cuda")
    lib = "nvjet_sm90_tst_128x256_64x4_2x1_v_bz_coopB_NNT"
    ref = Profile(kernels=(KernelLaunch(name=lib, count=1, custom=False),), torch_ops=("aten::mm",))
    claimed = Profile(kernels=(KernelLaunch(name=lib, count=1, custom=True),), torch_ops=("aten::mm",))
    assert (custom_kernel_rule(claimed, ref, cfg) or "").startswith("no_custom_kernel")
    own = Profile(kernels=(KernelLaunch(name="gemm_p1_kernel(float const*, float const*, float*)", count=1,
                                        custom=True),), torch_ops=("aten::empty",))
    assert custom_kernel_rule(own, ref, cfg) is None


def test_a_candidates_own_reduce_kernel_is_its_own_but_pytorchs_templates_are_not() -> None:
    """Red team 9's honest softmax named `reduce_kernel` (an `extern "C"` kernel: no template arguments) read as
    PyTorch's; PyTorch's generic kernels are templates, with or without their namespace."""
    from kevolve.sandbox.common.profile import _is_custom

    own = ("reduce_kernel", "elementwise_kernel")
    assert _is_custom("reduce_kernel", own) and _is_custom("elementwise_kernel", own)
    assert not _is_custom("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float>>(at::native::ReduceOp)",
                          own)
    assert not _is_custom("void reduce_kernel<512, 1, at::native::ReduceOp<float>>(at::native::ReduceOp)", own)
    assert not _is_custom("void elementwise_kernel<128, 2, at::native::gpu_kernel_impl<…>>(int, …)", own)
    # cuBLAS's, by its parameter types, whatever name the candidate's source claims
    assert not _is_custom("void dot_kernel<float, 128, 0, cublasDotParams<cublasGemvTensor<float const>, "
                          "cublasGemvTensor<float> > >(cublasDotParams<cublasGemvTensor<float const>, "
                          "cublasGemvTensor<float> >)", ("dot_kernel",))


def test_the_names_given_to_cupys_generated_kernels_are_the_candidates() -> None:
    from kevolve.sandbox.policy.source import custom_kernel_names

    src = ('import cupy as cp\n_EW = cp.ElementwiseKernel("float32 x", "float32 y", "y = x > 0 ? x : 0", "relu_ew")\n'
           '_R = cp.ReductionKernel("T x", "T y", "x * x", "a + b", "y = a", "0", "sumsq_r")\n'
           '_N = cp.ElementwiseKernel("float32 x", "float32 y", "y = x", name="copy_ew")\n'
           '_D = cp.ElementwiseKernel("float32 x", "float32 y", "y = x")\n')
    assert {"relu_ew", "sumsq_r", "copy_ew"} <= set(custom_kernel_names(src))
    assert "kernel" not in custom_kernel_names(src)
