"""A Magnet run on the scripted model, in a subprocess, so a test can SIGKILL it mid-timestep.

python tests/magnet/scripted_run.py start RUN_DIR DELAY     # a new run
python tests/magnet/scripted_run.py resume RUN_DIR          # `fabula resume RUN_DIR`
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from agent import pipelines
from agent.magnet import runner
from agent.magnet.settings import MagnetSettings
from agent.testing.story_llm import StoryLLM
from tests.magnet.stories import story


def main() -> int:
    command, run_dir, *rest = sys.argv[1:]
    delay = float(rest[0]) if rest else 0.0
    pipelines.LLMOptions.open = lambda self, store=None, **kw: StoryLLM(delay=delay)  # type: ignore[method-assign]
    if command == "start":
        config = {**MagnetSettings().as_config(), "story": story(words=600).to_dict()}
        pipelines.start(run_dir, runner.NAME, config, pipelines.LLMOptions(backend="scripted")).close()
        return 0
    from agent.cli import main as cli

    return cli(["resume", run_dir])


if __name__ == "__main__":
    sys.exit(main())
