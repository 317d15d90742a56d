"""The environment's overrides are validated exactly like the session config's values."""

from __future__ import annotations

from pathlib import Path

import pytest

from audit_mcp.core.config import ENV_OVERRIDES, load_config
from audit_mcp.core.errors import ConfigError
from audit_mcp.usecases.service import AuditService

# A value the file may not hold for each overridable setting, as TOML and as the variable's text.
BAD = {
    "AUDIT_MCP_CONTEXT_TOKENS": ("0", "0"),
    "AUDIT_MCP_OUTPUT_TOKENS": ("-5", "-5"),
    "AUDIT_MCP_RPM": ("0", "0"),
    "AUDIT_MCP_ITPM": ("0", "0"),
    "AUDIT_MCP_OTPM": ("50", "50"),
    "AUDIT_MCP_HALF_LIFE_HOURS": ("0", "0"),
    "AUDIT_MCP_WAVE_KIND": ('"sideways"', "sideways"),
    "AUDIT_MCP_DISPATCH_MODE": ('"sideways"', "sideways"),
    "AUDIT_MCP_PROBE": ('"sometimes"', "sometimes"),
    "AUDIT_MCP_CLAIM_LEASE_SECONDS": ("1", "1"),
    "AUDIT_MCP_SHARE_LEARNED": ('"maybe"', "maybe"),
}


def test_every_override_is_listed() -> None:
    assert set(BAD) == set(ENV_OVERRIDES)


@pytest.mark.parametrize("name", sorted(BAD))
def test_a_value_the_file_refuses_is_refused_from_the_environment_too(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    section, key = ENV_OVERRIDES[name]
    toml_value, env_value = BAD[name]
    config = tmp_path / "audit.toml"
    config.write_text(f"[{section}]\n{key} = {toml_value}\n")
    with pytest.raises(ConfigError) as from_file:
        load_config(tmp_path, config)
    file_reason = str(from_file.value).split(f"{section}.{key}: ", 1)[1].split(". Fix", 1)[0]

    monkeypatch.setenv(name, env_value)
    with pytest.raises(ConfigError) as from_env:
        load_config(tmp_path)
    message = str(from_env.value)
    assert f"{name}={env_value!r} ([{section}] {key}): {file_reason}" in message
    assert "Fix or unset the variable" in message


def test_itpm_zero_blocks_the_audit_with_the_reason(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUDIT_MCP_ITPM", "0")
    step = AuditService(repo).next_step({"can_dispatch_subagents": True})
    assert step.step_kind == "blocked"
    assert "AUDIT_MCP_ITPM='0'" in step.reason and "greater than or equal to 1000" in step.reason


def test_valid_overrides_win_over_the_file_and_are_typed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "audit.toml"
    config.write_text('[model]\ninput_tokens_per_minute = 30000\n[scheduler]\nwave_kind = "rolling"\n')
    monkeypatch.setenv("AUDIT_MCP_ITPM", " 450000 ")
    monkeypatch.setenv("AUDIT_MCP_WAVE_KIND", "whole_wave")
    monkeypatch.setenv("AUDIT_MCP_HALF_LIFE_HOURS", "6")
    monkeypatch.setenv("AUDIT_MCP_RPM", "")  # blank is unset
    loaded = load_config(tmp_path, config)
    assert loaded.model.input_tokens_per_minute == 450_000
    assert loaded.model.requests_per_minute is None
    assert loaded.scheduler.wave_kind == "whole_wave" and loaded.scheduler.half_life_hours == 6.0


@pytest.mark.parametrize("text", ["lots", "1.5", "30_000x"])
def test_text_that_is_not_a_whole_number_is_refused_not_ignored(text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUDIT_MCP_ITPM", text)
    with pytest.raises(ConfigError, match=r"AUDIT_MCP_ITPM=.*valid integer"):
        load_config(Path("/nonexistent-root"))
