"""#35: the llama.cpp engine decodes on every core while other processes leave them idle and on
all but one while another process is busy (llama.cpp's threads spin at their barriers)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agent.llm import decode_threads
from agent.llm.decode_threads import DecodeThreads


class Machine:
    """A fake ``/proc/stat`` for two cores, a clock and this process's CPU time, moved by hand."""

    def __init__(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.stat = tmp_path / "stat"
        self.busy = {0: 0, 1: 0, 2: 0}  # ticks per core (core 2 is not this process's)
        self.wall = 100.0
        self.own = 0.0
        self.write()
        monkeypatch.setattr(decode_threads.time, "monotonic", lambda: self.wall)
        monkeypatch.setattr(decode_threads.os, "times", lambda: os.times_result((self.own, 0.0, 0.0, 0.0, 0.0)))
        monkeypatch.setattr(decode_threads.os, "sysconf", lambda name: 100)

    def write(self) -> None:
        lines = ["cpu  1 2 3 4 5 6 7 8 0 0"]
        for core, busy in self.busy.items():  # user nice system idle iowait irq softirq steal guest guest_nice
            lines.append(f"cpu{core} {busy} 0 0 5000 7 0 0 0 0 0")
        self.stat.write_text("\n".join(lines) + "\nintr 1 2 3\n")

    def run(self, seconds: float, *, own_cores: float, other_cores: float, elsewhere: float = 0.0) -> None:
        """``seconds`` pass: this process keeps ``own_cores`` busy, others ``other_cores`` of ours
        and ``elsewhere`` of a core this process may not use."""
        ticks = (own_cores + other_cores) * seconds * 100
        self.busy[0] += int(ticks / 2)
        self.busy[1] += int(ticks / 2)
        self.busy[2] += int(elsewhere * seconds * 100)
        self.own += own_cores * seconds
        self.wall += seconds
        self.write()


@pytest.fixture
def machine(tmp_path, monkeypatch) -> Machine:
    return Machine(tmp_path, monkeypatch)


def test_idle_cores_decode_on_all_and_a_busy_neighbour_leaves_one_spare(machine):
    threads = DecodeThreads(cores={0, 1}, stat=machine.stat)
    assert threads.threads == 1  # nothing read yet: one core spare
    machine.run(2.0, own_cores=1.0, other_cores=0.0, elsewhere=1.0)  # busy only where we may not run
    assert threads.choose() == 2
    machine.run(1.0, own_cores=1.3, other_cores=0.7)  # a neighbour took 0.7 of a core from our two
    assert threads.choose() == 1
    machine.run(1.0, own_cores=1.0, other_cores=0.1)
    assert threads.choose() == 2


def test_a_window_too_short_to_read_keeps_the_count(machine):
    threads = DecodeThreads(cores={0, 1}, stat=machine.stat)
    machine.run(1.0, own_cores=1.0, other_cores=0.0)
    assert threads.choose() == 2
    machine.run(0.05, own_cores=0.0, other_cores=2.0)  # 50 ms of a busy neighbour: not read
    assert threads.choose() == 2
    machine.run(0.5, own_cores=0.5, other_cores=1.5)  # read together with the 50 ms before
    assert threads.choose() == 1


def test_a_fixed_count_and_one_core_are_never_changed(machine):
    fixed = DecodeThreads(1, cores={0, 1}, stat=machine.stat)
    single = DecodeThreads(cores={0}, stat=machine.stat)
    machine.run(1.0, own_cores=1.0, other_cores=0.0)
    assert fixed.choose() == 1 and single.choose() == 1


def test_an_unreadable_proc_stat_keeps_one_core_spare(tmp_path):
    threads = DecodeThreads(cores={0, 1}, stat=tmp_path / "missing")
    assert threads.choose() == 1
