"""Achieved bandwidth / roofline arithmetic and the parsing of Nsight Compute's CSV."""

from __future__ import annotations

import pytest

from kevolve.records import KernelLaunch, Profile
from kevolve.sandbox.ncu import parse_csv, summarize
from kevolve.sandbox.roofline import annotate

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
