"""A base install (no extra) runs every command's --help and ``eval compare``/``report`` on stored
judgments: checked here with every module outside the standard library and the base
dependencies made unimportable (``scripts/check-base-install`` does it in a real fresh venv)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_every_command_and_compare_report_work_without_any_extra():
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "base_install_check.py"), "--block-extras"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "base install check: ok" in done.stdout
    assert "matplotlib" in done.stdout  # the eval extra really was out of reach


def test_the_check_fails_when_a_command_imports_an_extra(tmp_path):
    """The blocker itself: a module that imports numpy at the top cannot be imported under it."""
    probe = tmp_path / "probe.py"
    scripts = str(ROOT / "scripts")
    probe.write_text(
        f"import sys\nsys.path.insert(0, {scripts!r})\nimport base_install_check as b\n"
        "sys.meta_path.insert(0, b.BlockExtras(b.allowed_modules()))\nimport numpy\n"
    )
    done = subprocess.run([sys.executable, str(probe)], capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "No module named 'numpy' (not in a base install)" in done.stderr
