"""The model options are written once (``agent.llm.option_table``): a value is refused alike by its
flag, its environment variable and its config key, and every key and variable the table names is
the one the CLI and the config file read."""

from __future__ import annotations

import pytest

from agent.cli import config_file, main
from agent.llm.option_table import MODEL_OPTIONS


def _refusal(argv: list[str], capsys) -> str:
    try:
        code = main(argv)
    except SystemExit as exc:
        code = int(exc.code or 0)
    assert code == 2
    return capsys.readouterr().err


@pytest.mark.parametrize(
    ("flag", "variable", "key", "value", "sentence"),
    [
        ("--call-timeout", "FABULA_CALL_TIMEOUT", "call_timeout", "86401", "must be between 0 and 86400 seconds"),
        ("--call-timeout", "FABULA_CALL_TIMEOUT", "call_timeout", "0", "must be between 0 and 86400 seconds, got '0'"),
        ("--call-timeout", "FABULA_CALL_TIMEOUT", "call_timeout", "soon", "must be a number of seconds, got 'soon'"),
        (None, "FABULA_ALLOW_UNCONSTRAINED", "allow_unconstrained", "perhaps", "must be true or false (1/0, yes/no)"),
        (None, "FABULA_EMBEDDED_ENGINE", "embedded_engine", "vulkan", "must be one of auto, llama.cpp, transformers"),
    ],
)
def test_a_value_is_refused_alike_by_flag_environment_and_config_file(
    flag, variable, key, value, sentence, capsys, monkeypatch
):
    prompt = ["prompt", "--endpoint", "http://127.0.0.1:9/v1", "Say hello."]  # refused before any connection
    if flag:
        assert sentence in _refusal([*prompt, flag, value], capsys)
    monkeypatch.setenv(variable, value)
    assert sentence in _refusal(prompt, capsys)
    monkeypatch.delenv(variable)
    assert sentence in _refusal(["config", "set", key, value], capsys)


def test_the_config_file_and_the_flags_read_the_tables_names():
    keyed = {row.config_key: row for row in MODEL_OPTIONS if row.config_key}
    assert set(config_file.KEYS) == {*keyed, "profile"}
    assert all(config_file.KEYS[key].env == row.env for key, row in keyed.items())
    for row in MODEL_OPTIONS:
        if row.flag and row.env:
            assert f"env {row.env}" in row.flag_help(None) and f"config {row.config_key}" in row.flag_help("RUN")
