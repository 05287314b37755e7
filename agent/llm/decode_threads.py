"""How many threads the llama.cpp engine decodes with: every core while the others are idle,
one spare while another process is busy.

Why: llama.cpp's threads spin at their barriers, so one thread preempted by another process
stalls every step. On 2 cores, SmolLM2 decoded 85/40 tokens/s (200/3,000-token context) on two
threads against 51/31 on one while nothing else ran, but 23/12 on two against 54/33 on one beside
one busy process (docs/design/embedded-speed.md). Neither fixed count is right; the cores' use
by other processes, read from ``/proc/stat`` between calls and every few dozen tokens, decides.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

BUSY_ELSEWHERE = 0.5
"""Cores' worth of other processes' work above which one core is left to them."""
MIN_WINDOW_S = 0.2
"""A shorter window than this is not read (``/proc/stat`` counts in 10 ms ticks)."""
PROC_STAT = Path("/proc/stat")


def usable_cores() -> set[int]:
    return set(os.sched_getaffinity(0))


class DecodeThreads:
    """The thread count for the next stretch of decoding. ``fixed``: always that many (a caller's
    choice; the watch is off). Otherwise :meth:`choose` reads what other processes did on this
    process's cores since it last looked and answers all of them, or all but one."""

    def __init__(self, fixed: int | None = None, *, cores: set[int] | None = None, stat: Path = PROC_STAT) -> None:
        self.cores = cores if cores is not None else usable_cores()
        self.fixed = fixed
        self.stat = stat
        self.threads = fixed or max(1, len(self.cores) - 1)
        self._last = self._read()

    @property
    def all_cores(self) -> int:
        return len(self.cores)

    def choose(self) -> int:
        """The thread count to decode with now (unchanged when the window is too short to read)."""
        if self.fixed is not None or self.all_cores < 2:
            return self.threads
        now = self._read()
        if now is None or self._last is None:
            self._last = now
            return self.threads
        wall = now[0] - self._last[0]
        if wall < MIN_WINDOW_S:
            return self.threads
        elsewhere = ((now[1] - self._last[1]) - (now[2] - self._last[2])) / wall
        self._last = now
        self.threads = self.all_cores - 1 if elsewhere > BUSY_ELSEWHERE else self.all_cores
        return self.threads

    def _read(self) -> tuple[float, float, float] | None:
        """(wall clock, busy core-seconds on this process's cores, this process's CPU seconds),
        or ``None`` where ``/proc/stat`` cannot be read (then the count stays as it is)."""
        try:
            lines = self.stat.read_text().splitlines()
        except OSError:
            return None
        tick = os.sysconf("SC_CLK_TCK")
        busy = 0
        for line in lines:
            name, _, rest = line.partition(" ")
            if name.startswith("cpu") and name[3:].isdigit() and int(name[3:]) in self.cores:
                fields = [int(v) for v in rest.split()]
                busy += sum(fields[:8]) - fields[3] - fields[4]  # all but idle and iowait
        own = os.times()
        return time.monotonic(), busy / tick, own.user + own.system
