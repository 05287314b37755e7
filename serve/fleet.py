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
        """Start every replica, wait for all of them, then start the router and wait for it."""
        for server in self.replicas:
            server.start()
        with ThreadPoolExecutor(max_workers=len(self.replicas)) as pool:
            waits = [pool.submit(server.wait_ready, timeout_s) for server in self.replicas]
            deadline = time.monotonic() + timeout_s
            while not all(w.done() for w in waits) and time.monotonic() < deadline:
                for w in waits:
                    if w.done() and w.exception() is not None:
                        raise w.exception()  # type: ignore[misc]  # the first failure, with its log
                time.sleep(0.5)
            for w in waits:
                w.result()
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
                say(f"{server.name} exited with code {code}; {left} of {len(self.replicas)} left "
                    f"(log: {server.log_path}: {server.log_last_line()})")
        return dead

    def stop(self) -> None:
        """The router first (no new requests reach a stopping replica), then all replicas at once."""
        self.router.stop(grace_s=10.0)
        with ThreadPoolExecutor(max_workers=max(len(self.replicas), 1)) as pool:
            list(pool.map(lambda server: server.stop(), self.replicas))
