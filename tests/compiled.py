"""What a numba kernel compiles to, read from a fresh compile with the kernel's own options."""

from __future__ import annotations

from typing import Any


def fresh_llvm(kernel: Any) -> str:
    """The LLVM IR of ``kernel``'s first signature, compiled afresh (not read from numba's cache)
    with the options the kernel was declared with."""
    from numba import njit

    options = {key: value for key, value in kernel.targetoptions.items() if key != "cache"}
    fresh = njit(**options)(kernel.py_func)
    signature = kernel.signatures[0]
    fresh.compile(signature)
    return str(fresh.inspect_llvm(signature))


def counts_references(kernel: Any) -> bool:
    """Whether the compiled kernel calls numba's reference counting."""
    llvm = fresh_llvm(kernel)
    return "NRT_incref" in llvm or "NRT_decref" in llvm
