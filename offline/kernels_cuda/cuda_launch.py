"""What every generated CUDA launcher shares (emit.py writes most, cuda_split.py the split rows'): the
inputs made contiguous and `dev` set, and the choice between a vectorized kernel and its scalar twin."""

from __future__ import annotations

from kevolve.kernel_params import KernelParams
from kevolve.offline.kernels_cuda.cuda_dtype import aligned
from kevolve.offline.kernels_cuda.cuda_row import row_vectorizes
from kevolve.offline.graph.ir import Group


def has_scalar_twin(g: Group, p: KernelParams) -> bool:
    """Whether a row group's kernel reads or writes vectors, so that it needs a scalar twin for
    pointers that are not 16-byte aligned (a contiguous view into the middle of a tensor)."""
    return p.vec > 1 and row_vectorizes(g, p.vec)


def vector_choice(g: Group, name: str, p: KernelParams, tensors: list[str]) -> str:
    """A launcher line choosing the kernel name `kn`: the vectorized kernel only where every pointer
    is aligned to its vector width, else its scalar twin (never a misaligned vector access)."""
    if not has_scalar_twin(g, p):
        return f"    kn = {name!r}"
    return f"    kn = {name!r} if {aligned_all(g, tensors, p.vec)} else {name + '_v1'!r}"


def aligned_all(g: Group, tensors: list[str], vec: int) -> str:
    """A Python condition: every pointer (the leaves', then the output's) is aligned for `vec`-element
    accesses of its storage (16 bytes for float4, 8 for four bf16)."""
    dts = [leaf.dtype for leaf in g.leaves] + [g.out_dtype]
    if set(dts) == {"float32"}:  # one width for all: the fp32 launchers' own line
        return f"all(t.data_ptr() % {4 * vec} == 0 for t in ({', '.join(tensors)},))"
    return "(" + " and ".join(aligned(t, d, vec) for t, d in zip(tensors, dts, strict=True)) + ")"


def out_line(g: Group) -> str:
    """The launcher line allocating the output in its storage dtype."""
    return f"    out = torch.empty({tuple(g.out_shape)!r}, device=dev, dtype=torch.{g.out_dtype})"


def leaf_prologue(g: Group) -> list[str]:
    """Launcher lines: tensors made contiguous, Python numbers made 0-d fp32 tensors, `dev` set."""
    first = next(i for i, leaf in enumerate(g.leaves) if not leaf.scalar)
    lines = [f"    a{i} = a{i}.contiguous()" for i, leaf in enumerate(g.leaves) if not leaf.scalar]
    lines.append(f"    dev = a{first}.device")
    lines += [f"    a{i} = torch.full((), float(a{i}), device=dev, dtype=torch.float32)"
              for i, leaf in enumerate(g.leaves) if leaf.scalar]
    return lines


__all__ = ["aligned_all", "has_scalar_twin", "leaf_prologue", "out_line", "vector_choice"]
