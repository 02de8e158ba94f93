"""Configuration: one precedence, unknown keys rejected by name, the example file valid."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from pydantic import BaseModel

from mcp_memory.config import Settings, load_settings
from mcp_memory.core.errors import InvalidInputError

EXAMPLE = Path(__file__).resolve().parents[1] / "config.example.toml"


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests are about precedence: start from an environment without MCP_MEMORY_*."""
    for name in [n for n in os.environ if n.startswith("MCP_MEMORY_")]:
        monkeypatch.delenv(name)


def test_flags_beat_environment_beat_file_beat_defaults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "c.toml"
    config.write_text('namespace = "from-file"\nlog_level = "DEBUG"\n[limits]\nmax_k = 7\nmax_batch = 9\n')
    monkeypatch.setenv("MCP_MEMORY_NAMESPACE", "from-env")
    monkeypatch.setenv("MCP_MEMORY_LIMITS__MAX_K", "8")
    settings = load_settings(config, principal="flag-principal")
    assert settings.namespace == "from-env"
    assert settings.limits.max_k == 8
    assert settings.limits.max_batch == 9
    assert settings.log_level == "DEBUG"
    assert settings.principal == "flag-principal"
    assert settings.limits.max_tags == 32  # untouched default
    assert load_settings(config, namespace="from-flag").namespace == "from-flag"


def test_the_config_file_is_found_through_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "c.toml"
    config.write_text('principal = "from-env-file"\n')
    monkeypatch.setenv("MCP_MEMORY_CONFIG", str(config))
    assert load_settings().principal == "from-env-file"


def test_an_unknown_key_in_the_file_is_named(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text("[limits]\nmax_kk = 3\n")
    with pytest.raises(InvalidInputError, match=r"unknown key 'limits\.max_kk'"):
        load_settings(config)


def test_an_unknown_environment_variable_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCP_MEMORY_NAMESPAEC", "typo")
    with pytest.raises(InvalidInputError, match="MCP_MEMORY_NAMESPAEC"):
        load_settings()


def test_a_secret_cannot_be_put_in_the_file(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text('[embedding]\napi_key = "sk-should-not-be-here"\n')
    with pytest.raises(InvalidInputError, match=r"unknown key 'embedding\.api_key'") as raised:
        load_settings(config)
    assert "sk-should-not-be-here" not in str(raised.value)


def test_a_bad_value_names_the_key(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text('[embedding]\nprovider = "word2vec"\n')
    with pytest.raises(InvalidInputError, match=r"embedding\.provider"):
        load_settings(config)


def test_a_missing_config_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="does not exist"):
        load_settings(tmp_path / "nope.toml")


def test_a_folder_as_config_file_is_named_as_such_and_dev_null_reads_as_no_file(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="is not a file; fix the --config path"):
        load_settings(tmp_path)
    assert load_settings(Path(os.devnull), data_dir=tmp_path).limits == Settings.model_fields["limits"].default


def test_the_example_file_is_valid_and_documents_every_key() -> None:
    settings = load_settings(EXAMPLE)
    assert settings.limits == Settings.model_fields["limits"].default
    assert settings.recall == Settings.model_fields["recall"].default
    assert settings.embedding == Settings.model_fields["embedding"].default
    text = EXAMPLE.read_text()

    def keys(model: type[BaseModel]) -> list[str]:
        return list(model.model_fields)

    for name in keys(Settings):
        assert name in text, f"config.example.toml does not document {name!r}"
        default = Settings.model_fields[name].default
        if isinstance(default, BaseModel):
            assert f"[{name}]" in text
            for sub in keys(type(default)):
                assert sub in text, f"config.example.toml does not document {name}.{sub}"
