"""What both Triton kernel writers (triton_mm.py, triton_conv.py) share: a launcher's last lines, and
compiling a generated kernel for a GPU architecture without a GPU present (the CPU tests' check that it builds)."""

from __future__ import annotations

from kevolve.offline.graph.ir import Group


def launch_tail(name: str, grid: str, args: list[str], g: Group, epi: list[str], epi_specs: list,
                consts_opts: tuple[dict[str, object], dict[str, int]], zeroed: bool = False) -> list[str]:
    """A Triton launcher's last lines: epilogue leaves made 0-d fp32 tensors (Python numbers) or contiguous,
    the output (zeroed for a kernel that adds into it), the launch with its constexprs and options, the return."""
    lines = [f"    {n} = torch.full((), float({n}), device=dev, dtype=torch.float32)" if leaf.scalar
             else f"    {n} = {n}.contiguous()" for n, leaf in zip(epi, epi_specs, strict=True)]
    kw = ", ".join(f"{k}={v!r}" for k, v in {**consts_opts[0], **consts_opts[1]}.items())
    return lines + [f"    out = torch.{'zeros' if zeroed else 'empty'}({tuple(g.out_shape)!r}, device=dev, dtype=torch.float32)",
                    f"    {name}[{grid}]({', '.join(args)}, {kw})", "    return out"]


def compile_kernel(kernel: object, sig: dict[str, str], consts: dict[str, object], opts: dict[str, int],
                   arch: int = 90) -> dict[str, str]:
    """`triton.compile` of a JITFunction for `arch` with no GPU present; the stages' text by name."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    out = triton.compile(ASTSource(fn=kernel, signature=sig, constexprs=consts),
                         target=GPUTarget("cuda", arch, 32), options=opts)
    return out.asm


__all__ = ["compile_kernel", "launch_tail"]
