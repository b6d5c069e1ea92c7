"""The random search's inputs: codec bytes from a seeded random stream.

An input is of one scope (``engine.codec.decode``): the classic scope, 4 to
256 bytes (9 on average: short traces over small stores), or the scaled one,
a first byte from ``SCALED`` on and 256 to 4,096 bytes more (512 on average:
a swarm configuration and long traces). Lengths are geometric and bytes
uniform, the distribution Hypothesis's ``st.binary`` draws for these bounds;
drawn here directly, because Hypothesis's engine spent about 290 µs on each
input (more than a classic trace's whole run on the spec and the target),
and the search does not use what that buys: the inputs are shrunk by the
driver (byte cuts, then ``drivers.shrink`` over the trace).
"""

from __future__ import annotations

import math
from random import Random

from auxspec.engine.codec import SCALED, SPECIAL_SIZES


class Scope:
    """An input's length: ``least`` bytes and a geometric number more,
    ``mean`` in all on average, at most ``most``."""

    def __init__(self, least: int, most: int, mean: int, first: range | None = None) -> None:
        self.least, self.most = least, most
        self.log_continue = math.log((mean - least) / (mean - least + 1))  # P(one byte more), as a log
        self.first = first  # the range of the first byte, drawn apart from the rest (None: no such byte)

    def draw(self, rng: Random) -> bytes:
        more = int(math.log(1.0 - rng.random()) / self.log_continue)  # geometric: floor(log U / log p)
        body = rng.randbytes(min(self.least + more, self.most))
        return body if self.first is None else bytes([rng.choice(self.first)]) + body


CLASSIC = Scope(4, 256, 9)
SCALED_SCOPE = Scope(256, 4096, 512, first=range(SCALED, SPECIAL_SIZES))
