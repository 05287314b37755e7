"""``fabula view RUN_OR_FOLDER [--port P] [--host H] [--token]``: a local web view of runs, and the editing room."""

from __future__ import annotations

import argparse
import ipaddress
import secrets
import sys

from agent.cli.checks import finite
from agent.cli.common import loud
from agent.cli.errors import CLIError

LOOPBACK = "127.0.0.1"


def add_parser(sub) -> None:
    parser = sub.add_parser(
        "view",
        help="read, inspect and watch runs in a local web page; the editing room",
        description="Serve a web view of one run or of every run in a folder: the story, the "
        "state over time, the call ledger and evaluation judgments, updated live while a run is "
        "written; and the editing room (approve, revise with a note, edit, use a draft, lint, "
        "start a book), whose actions run the CLI's commands. Bound to 127.0.0.1 unless --host "
        "is given; beyond loopback the room acts only with --token.",
    )
    parser.add_argument("path", metavar="RUN_OR_FOLDER", help="one run directory, or a folder of runs")
    parser.add_argument("--port", type=int, default=8765, help="port (default 8765)")
    parser.add_argument(
        "--host", default=None, help=f"address to listen on (default {LOOPBACK}); anything else exposes your runs"
    )
    parser.add_argument(
        "--poll",
        "--interval",
        dest="poll",
        type=finite(0.0, 3600.0),
        default=1.5,
        metavar="SECONDS",
        help="how often open pages check for new units (default 1.5; 0: never)",
    )
    parser.add_argument(
        "--token",
        action="store_true",
        help="with --host beyond loopback: allow the editing room's actions to whoever types the "
        "access token printed once at start (without it, a view beyond loopback only reads)",
    )
    parser.set_defaults(handler=run)


def listen_address(host: str | None) -> str:
    """127.0.0.1 unless a host was given explicitly; an explicit non-loopback one is warned about."""
    if host is None:
        return LOOPBACK
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = host == "localhost"
    if not loopback:
        print(f"fabula view: listening on {host}: anyone who can reach it can read these runs", file=loud())
    return host


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def _check_bind(host: str, port: int) -> None:
    """The address can be listened on (a valid, local address; the port free): else one line, not the
    web server's own error after it started."""
    import socket

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError, ValueError) as exc:
        raise CLIError(f"--host {host}: not an address to listen on ({exc})") from exc
    family, kind, proto, _, address = infos[0]
    try:
        with socket.socket(family, kind, proto) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(address)
    except OSError as exc:
        import errno

        if exc.errno == errno.EADDRINUSE:
            raise CLIError(
                f"port {port} is in use (another fabula view?): open that one, or give another port "
                f"with --port {port + 1 if port < 65535 else 8765}",
                exit_code=1,
            ) from exc
        raise CLIError(f"cannot listen on {host}:{port}: {exc.strerror or exc}", exit_code=1) from exc


def run(args: argparse.Namespace) -> int:
    try:
        import uvicorn

        from agent.view.app import create_app, host_names
    except ImportError as exc:
        raise CLIError(
            f"fabula view needs the view extra ({exc.name} is missing): run scripts/setup, or "
            "pip install -e '.[view]' in the fabula checkout",
            exit_code=1,
        ) from exc
    if not 1 <= args.port <= 65535:
        raise CLIError(f"--port must be 1-65535, not {args.port}")
    from agent.store import StoreError
    from agent.view.room import RoomSettings

    host = listen_address(args.host)
    beyond = not _is_loopback(host)
    access = secrets.token_urlsafe(18) if beyond and args.token else None
    room = RoomSettings(access=access, enabled=not beyond or access is not None)
    try:
        app = create_app(args.path, poll_ms=int(args.poll * 1000), room=room, hosts=host_names(args.host))
    except StoreError as exc:
        raise CLIError(str(exc)) from exc
    _check_bind(host, args.port)
    if access is not None:
        print(f"fabula view: the editing room's access token (shown once): {access}", file=sys.stderr)
    elif beyond:
        print(
            "fabula view: the editing room's actions are off beyond loopback (give --token to allow them)",
            file=sys.stderr,
        )
    print(f"fabula view: http://{host}:{args.port}/ (Ctrl-C stops it)", file=sys.stderr)
    uvicorn.run(app, host=host, port=args.port, log_level="warning")
    return 0
