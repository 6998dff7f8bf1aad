"""kevolve/where_time.py on a GPU-shaped pair of profiles (records as the runner makes them: a cuDNN convolution
left to the library on both sides, eager's element-wise kernels, the candidate's one fused kernel)."""

from __future__ import annotations

from kevolve.records import Evaluation, KernelLaunch, Outcome, Profile
from kevolve.where_time import rows


def _k(name: str, us: float, custom: bool = False) -> KernelLaunch:
    return KernelLaunch(name=name, count=1, device_time_us=us, custom=custom)


def test_kernels_are_put_by_who_wrote_them_with_shares_and_ratios() -> None:
    conv = "void cudnn::engines_precompiled::nchwToNhwcKernel<float>"
    ref = Profile(kernels=(_k(conv, 600.0), _k("sm90_xmma_fprop_implicit_gemm_f32f32", 1400.0),
                           _k("void at::native::batch_norm_transform_input_kernel<float>", 500.0),
                           _k("void at::native::vectorized_elementwise_kernel<4, at::native::relu>", 500.0)),
                  total_us=3000.0)
    cand = Profile(kernels=(_k(conv, 600.0), _k("sm90_xmma_fprop_implicit_gemm_f32f32", 1400.0),
                            _k("_kv_launch_0_bn_relu", 250.0, custom=True)), total_us=2250.0)
    ev = Evaluation(candidate_id="c", problem_id="p", outcome=Outcome.OK, reason="ok", profile=cand, ref_profile=ref)
    got = {r[0].strip(): r[1:] for r in rows(ev)}
    assert got["library kernels (cuBLAS, cuDNN, CUTLASS)"] == ("2.0000 ms (67%)", "2.0000 ms (89%)", "1.00x")
    assert got["PyTorch's other kernels"] == ("1.0000 ms (33%)", "—", "—")
    assert got["the candidate's own kernels (1)"] == ("—", "0.2500 ms (11%)", "4.00x")  # eager's 1 ms it replaced
    assert got["_kv_launch_0_bn_relu"] == ("", "0.2500 ms (11%)", "")
    assert got["total (one profiled call)"] == ("3.0000 ms (100%)", "2.2500 ms (100%)", "1.33x")
    assert rows(ev.model_copy(update={"ref_profile": None})) == []


def test_the_offline_sample_report_has_a_breakdown_row_per_solved_problem() -> None:
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "scripts" / "run_offline_gpu.py"
    spec = importlib.util.spec_from_file_location("run_offline_gpu", path)
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    ref = Profile(kernels=(_k("void cudnn::conv", 600.0), _k("void at::native::relu_kernel", 400.0)), total_us=1000.0)
    cand = Profile(kernels=(_k("void cudnn::conv", 600.0), _k("_kv_launch_0", 100.0, custom=True)), total_us=700.0)
    ev = Evaluation(candidate_id="c", problem_id="p", outcome=Outcome.OK, reason="ok", profile=cand, ref_profile=ref)
    lines = mod.where_section([{"level": 3, "number": 9, "status": "solved", "where": rows(ev)},
                               {"level": 3, "number": 4, "status": "failed"}])
    assert lines[-1] == ("| L3_9 | 0.6000 ms (60%) / 0.6000 ms (86%) (1.00x) | 0.4000 ms (40%) / — (—) | "
                         "the candidate's own kernels (1): 0.1000 ms (14%) (4.00x) | "
                         "1.0000 ms (100%) / 0.7000 ms (100%) (1.43x) |"), lines[-1]
    assert sum(line.startswith("| L3_") for line in lines) == 1


def test_evals_report_says_why_the_timing_stopped_where_it_did(capsys) -> None:  # noqa: ANN001
    from kevolve.records import TimingStats
    from kevolve.report import print_evaluation

    timing = TimingStats(median_ms=2.0, mean_ms=2.0, min_ms=2.0, max_ms=2.0, iqr_ms=0.0, trials=5, method="m",
                         stopped="timing stopped after 5 batches of 3: every call over 2x the search's best (0.5 ms)")
    print_evaluation(Evaluation(candidate_id="c", problem_id="p", outcome=Outcome.OK, reason="ok", timing=timing))
    out = capsys.readouterr().out
    assert "n=5) stopped: every call over 2x the search's best (0.5 ms)" in " ".join(out.split())


def test_a_model_is_split_into_parts_where_both_sides_run_the_same_kernel() -> None:
    from kevolve.where_time import parts, short

    conv = "void cudnn::cnn::conv2d_grouped_direct_kernel<float, float, float>(cudnn::cnn::Params)"
    bn = "void at::native::batch_norm_transform_input_kernel<float, float, float, int>(at::GenericPackedTensorAccessor)"
    relu = "void at::native::vectorized_elementwise_kernel<4, at::native::relu_functor<float>>(int, float*)"
    add = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>(int, float*)"
    ref_k = (_k(conv, 1200.0), _k(bn, 600.0), _k(relu, 400.0), _k(add, 100.0))
    ref = Profile(kernels=ref_k, order=((0, 600.0), (1, 300.0), (2, 200.0), (0, 600.0), (1, 300.0), (3, 100.0),
                                        (2, 200.0)), total_us=2300.0)
    cand_k = (_k(conv, 1200.0), _k("_kv_launch_0_kernel", 150.0, custom=True), _k("_kv_launch_1_kernel", 200.0, True))
    cand = Profile(kernels=cand_k, order=((0, 600.0), (1, 150.0), (0, 600.0), (2, 200.0)), total_us=1550.0)
    ev = Evaluation(candidate_id="c", problem_id="p", outcome=Outcome.OK, reason="ok", profile=cand, ref_profile=ref)
    assert short(bn) == "batch_norm_transform_input_kernel"
    assert short(relu) == "vectorized_elementwise_kernel[relu_functor]"
    assert parts(ev) == [
        ("part 1: _kv_launch_1_kernel", "batch_norm_transform_input_kernel, vectorized_elementwise_kernel"
         "[CUDAFunctor_add], vectorized_elementwise_kernel[relu_functor]", "26%", "0.6000 / 0.2000", "3.00x"),
        ("part 2: _kv_launch_0_kernel", "batch_norm_transform_input_kernel, vectorized_elementwise_kernel"
         "[relu_functor]", "22%", "0.5000 / 0.1500", "3.33x"),
        ("kept as they were (2 kernels)", "the same kernels", "52%", "1.2000 / 1.2000", "1.00x")]
    bad = cand.model_copy(update={"order": ((7, 1.0),)})  # an index a runner made up: no parts, no error
    assert parts(ev.model_copy(update={"profile": bad})) == []
    assert parts(ev.model_copy(update={"ref_profile": ref.model_copy(update={"order": ()})})) == []
