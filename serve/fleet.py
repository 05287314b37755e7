"""Run N replicas and the router as one service: start, watch, report, stop them all.

The replicas start together (their start-up dominates: 1-3 minutes each on CPU) and the
router only once every replica answers, so its first worker check passes. While serving, a
replica that dies is reported in one line and the others keep serving (the router's health
check stops sending it requests); when none is left, or the router itself dies, the whole
fleet stops with an error. Ctrl-C, SIGTERM or SIGHUP stop the router first (no new
requests), then every replica.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from serve.launcher import ServeConfig, ServeError, Server
from serve.replicas import Router, RouterConfig, pinning

Say = Callable[[str], None]


class Fleet:
    """The replicas' servers and the router, each with its own log under ``log_dir``."""

    def __init__(self, replicas: list[ServeConfig], router: RouterConfig, log_dir: Path) -> None:
        self.replicas: list[Server] = []
        for i, config in enumerate(replicas, 1):
            server = Server(config, log_dir / f"replica-{i}-{config.port}.log", prefix=pinning(config))
            server.name = f"replica {i} (port {config.port})"
            self.replicas.append(server)
        self.router = Router(router, log_dir / f"router-{router.port}.log")
        self._reported: set[int] = set()

    def start(self, timeout_s: float, say: Say) -> None:
        """Start every replica, wait for all of them, then start the router and wait for it.

        One loop polls them all (no threads), so Ctrl-C during start-up stops at once."""
        for server in self.replicas:
            server.start()
        waiting = list(self.replicas)
        deadline = time.monotonic() + timeout_s
        next_note = time.monotonic() + 30
        while waiting:
            for server in list(waiting):
                code = server.process.poll() if server.process else None
                if code is not None:
                    raise ServeError(f"{server.name} exited with code {code} before it was ready:\n{server.log_tail()}")
                if server.answers():
                    waiting.remove(server)
            if time.monotonic() > deadline:
                raise ServeError(f"{waiting[0].name} was not ready after {timeout_s:.0f} s:\n{waiting[0].log_tail()}")
            if waiting and time.monotonic() > next_note:
                say(
                    f"{len(self.replicas) - len(waiting)} of {len(self.replicas)} replicas ready "
                    f"({waiting[0].name}: {waiting[0].log_last_line()})"
                )
                next_note = time.monotonic() + 30
            time.sleep(0.5 if waiting else 0)
        say(f"{len(self.replicas)} replicas ready; starting sglang-router ({self.router.router.policy})")
        self.router.start()
        self.router.wait_ready(min(timeout_s, 120.0))

    def watch(self, say: Say, poll_s: float = 1.0) -> None:
        """Serve until the router dies or no replica is left; report each dead replica once."""
        while True:
            code = self.router.process.poll() if self.router.process else None
            if code is not None:
                raise ServeError(f"the router exited with code {code}:\n{self.router.log_tail()}")
            self.report_dead(say)
            if len(self._reported) == len(self.replicas):
                raise ServeError("every replica has exited; stopping the router")
            time.sleep(poll_s)

    def report_dead(self, say: Say) -> list[int]:
        """One line per replica that exited since the last look; returns their indexes."""
        dead = []
        for i, server in enumerate(self.replicas):
            code = server.process.poll() if server.process else None
            if code is not None and i not in self._reported:
                self._reported.add(i)
                dead.append(i)
                left = len(self.replicas) - len(self._reported)
                say(
                    f"{server.name} exited with code {code}; {left} of {len(self.replicas)} left "
                    f"(log: {server.log_path}: {server.log_last_line()})"
                )
        return dead

    def stop(self) -> None:
        """The router first (no new requests reach a stopping replica), then all replicas at once."""
        self.router.stop(grace_s=10.0)
        for server in self.replicas:  # SIGINT to all first, so they shut down together
            server.interrupt()
        # ... and each is waited on (and escalated: SIGTERM, SIGKILL) at the same time, so the
        # whole stop is bounded by one replica's escalation (50 s), not their sum: on a loaded
        # CPU a vLLM replica once took its whole 30 s grace, and two in turn passed 90 s.
        with ThreadPoolExecutor(max_workers=max(len(self.replicas), 1)) as pool:
            list(pool.map(lambda server: server.stop(), self.replicas))
