"""numba's njit as the archive kernels use it (encoding_kernel.py, decoding_kernel.py,
timestamp_kernel.py, prefix_kernel.py, digit_filter.py): machine code cached on disk (next to the
module, else in the user's cache directory), so a process loads it in a fraction of a second
instead of compiling it; compiled per process where neither is writable.

A compiled function calls only compiled functions of its own module: the cache is kept per source
file and checked against that file alone, so code compiled in from another module would stay as it
was when cached after that module changed. Share a rule across modules as a numpy function whose
result a kernel takes (decoding_kernel.float_bits_valid)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, TypeVar, cast

import numba

Function = TypeVar("Function", bound=Callable[..., Any])


def compiled(inline: bool = False) -> Callable[[Function], Function]:
    """The decorator; `inline` inlines the function into the compiled functions that call it."""
    how: Literal["always", "never"] = "always" if inline else "never"

    def compile_(function: Function) -> Function:
        try:
            return cast(Function, numba.njit(function, cache=True, nogil=True, inline=how))
        except RuntimeError:  # numba: "cannot cache function ...: no locator available"
            return cast(Function, numba.njit(function, nogil=True, inline=how))

    return compile_


__all__ = ["compiled"]
