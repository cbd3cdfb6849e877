"""Putting a piece of text before each value of a column, compiled (numba): one pass that copies
each row's piece, then its value. timestamp_text.join_timestamps puts the rendered timestamp texts
back this way (with numpy it took a mask over every output byte and two masked copies), and
decoding_kernel.py writes the same pieces before the messages it decodes."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .compiled import compiled


@dataclass(frozen=True)
class Prefixes:
    """Row i's piece is pieces[at[i]:at[i] + width[i]] (uint8 bytes, int64 positions and widths)."""

    pieces: np.ndarray
    at: np.ndarray
    width: np.ndarray

    @staticmethod
    def empty(count: int) -> Prefixes:
        """No piece before any of `count` rows."""
        zeros = np.zeros(count, dtype=np.int64)
        return Prefixes(np.zeros(0, dtype=np.uint8), zeros, zeros)


@compiled()
def _prepend(pieces: np.ndarray, piece_at: np.ndarray, piece_width: np.ndarray, data: np.ndarray,
             offsets: np.ndarray, out_offsets: np.ndarray, out: np.ndarray) -> None:
    for row in range(len(offsets) - 1):
        position = out_offsets[row]
        start, width = piece_at[row], piece_width[row]
        out[position:position + width] = pieces[start:start + width]
        position += width
        value_start, value_end = offsets[row], offsets[row + 1]
        out[position:position + value_end - value_start] = data[value_start:value_end]


def prepend(prefixes: Prefixes, data: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each value data[offsets[i]:offsets[i + 1]] (uint8 bytes, int64 offsets) after its piece:
    (bytes, offsets)."""
    out_offsets = offsets - offsets[0]
    out_offsets[1:] += np.cumsum(prefixes.width)
    out = np.empty(int(out_offsets[-1]), dtype=np.uint8)
    _prepend(prefixes.pieces, prefixes.at, prefixes.width, data, offsets, out_offsets, out)
    return out, out_offsets


__all__ = ["Prefixes", "prepend"]
