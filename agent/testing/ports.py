"""Free loopback ports, for servers a test or benchmark starts as a child process."""

from __future__ import annotations

import socket


def free_port(count: int = 1) -> int:
    """A loopback port that is free now, with the ``count - 1`` ports after it free too (a router and
    its replicas). Free, not reserved: a server this process starts itself binds port 0 instead."""
    for _ in range(50):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
        if port + count <= 65535 and all(_free(port + i) for i in range(1, count)):
            return port
    raise RuntimeError("no run of free ports found")


def _free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False
