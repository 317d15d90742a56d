"""``audit-mcp run --quota-probe auto|never|force``: the provider asked about its limits before the first plan."""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from audit_mcp.surfaces.cli import main
from audit_mcp.surfaces.cli.exits import EXIT_USAGE
from tests.test_headless import TEMPLATE

MODEL = "claude-sonnet-4-6"


class _Provider:
    """The provider's models endpoint, answering with its rate-limit headers; it counts the calls."""

    def __init__(self) -> None:
        self.calls: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.calls.append(request)
        return httpx.Response(
            200,
            json={"id": MODEL, "max_input_tokens": 1_000_000, "max_tokens": 64_000},
            headers={"anthropic-ratelimit-requests-limit": "1000", "anthropic-ratelimit-input-tokens-limit": "450000"},
        )


@pytest.fixture
def provider(monkeypatch: pytest.MonkeyPatch) -> Iterator[_Provider]:
    fake = _Provider()
    real = httpx.Client

    def client(**kwargs: Any) -> httpx.Client:
        return real(**{**kwargs, "transport": httpx.MockTransport(fake)})

    monkeypatch.setattr(httpx, "Client", client)
    previous = signal.getsignal(signal.SIGTERM)
    yield fake
    signal.signal(signal.SIGTERM, previous)  # `run` treats SIGTERM as Ctrl-C; in-process, the handler goes back


def _run(capsys: pytest.CaptureFixture[str], repo: Path, *extra: str) -> tuple[int, str, str]:
    code = main(["run", "--root", str(repo), "--worker", TEMPLATE, "--host-model", MODEL, *extra])
    out, err = capsys.readouterr()
    return code, out, err


def _quota(capsys: pytest.CaptureFixture[str], repo: Path) -> dict[str, Any]:
    assert main(["quota", "--root", str(repo), "--host-model", MODEL]) == 0
    quota: dict[str, Any] = json.loads(capsys.readouterr().out)
    return quota


def test_auto_asks_the_provider_and_the_first_plan_obeys_its_headers(
    repo: Path, capsys: pytest.CaptureFixture[str], provider: _Provider, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    code, out, err = _run(capsys, repo, "--quota-probe", "auto", "--max-runs", "1")
    assert code in (0, 3), err
    assert len(provider.calls) == 1 and provider.calls[0].url.path == f"/v1/models/{MODEL}"
    assert "provider probe: anthropic/claude-sonnet-4-6" in err
    assert "requests_per_minute=1000" in err and "input_tokens_per_minute=450000" in err
    limits = _quota(capsys, repo)["limits"]
    assert limits["input_tokens_per_minute"]["value"] == 450_000
    assert limits["input_tokens_per_minute"]["confidence"] == "high"
    assert "rate-limit headers" in limits["input_tokens_per_minute"]["source"]
    assert json.loads(out)["runs"], out


def test_auto_without_a_key_and_never_ask_nothing_and_the_run_goes_on(
    repo: Path, capsys: pytest.CaptureFixture[str], provider: _Provider, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    code, _, err = _run(capsys, repo, "--quota-probe", "auto", "--max-runs", "1")
    assert code in (0, 3) and "ANTHROPIC_API_KEY is not set" in err, err
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    code, _, err = _run(capsys, repo, "--quota-probe", "never")
    assert code == 0, err
    assert provider.calls == []
    assert _quota(capsys, repo)["limits"]["input_tokens_per_minute"]["confidence"] == "low"


def test_force_refuses_to_start_when_the_provider_cannot_be_asked(
    repo: Path, capsys: pytest.CaptureFixture[str], provider: _Provider, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    code, out, err = _run(capsys, repo, "--quota-probe", "force")
    assert code == 1 and out == ""
    assert "--quota-probe force could not read any limit" in err and "ANTHROPIC_API_KEY" in err, err
    assert "--quota-probe auto" in err
    assert not (repo / ".audit-mcp" / "runs").exists()  # no worker started, nothing planned
    assert provider.calls == []


def test_an_unknown_probe_mode_is_a_usage_error(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    try:
        code = main(["run", "--root", str(repo), "--worker", TEMPLATE, "--quota-probe", "sometimes"])
    except SystemExit as exited:  # argparse refuses the command line before anything runs
        code = exited.code
    assert code in (2, EXIT_USAGE)
    assert "invalid choice: 'sometimes'" in capsys.readouterr().err


def _quota_probe(capsys: pytest.CaptureFixture[str], repo: Path, mode: str) -> tuple[int, dict[str, Any], str]:
    code = main(["quota", "--root", str(repo), "--host-model", MODEL, "--quota-probe", mode])
    out, err = capsys.readouterr()
    return code, (json.loads(out) if out else {}), err


def test_quota_probe_says_what_it_asked_and_learned_and_the_limits_then_obey_it(
    repo: Path, capsys: pytest.CaptureFixture[str], provider: _Provider, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    code, quota, err = _quota_probe(capsys, repo, "auto")
    assert code == 0, err
    assert len(provider.calls) == 1 and provider.calls[0].url.path == f"/v1/models/{MODEL}"
    probe = quota["probe"]
    assert probe["mode"] == "auto" and probe["asked"] == f"anthropic models endpoint about {MODEL}"
    assert probe["learned"] == {"requests_per_minute": 1000, "input_tokens_per_minute": 450_000}
    assert probe["read"]["context_tokens"] == 1_000_000  # read, but only rate-limit headers are learned
    itpm = quota["limits"]["input_tokens_per_minute"]
    assert (itpm["value"], itpm["confidence"]) == (450_000, "high")
    # Learned: a later quota without the probe asks nothing and still plans with it.
    later = _quota(capsys, repo)
    assert later["limits"]["input_tokens_per_minute"]["value"] == 450_000 and len(provider.calls) == 1
    assert later["probe"]["mode"] == "never" and later["probe"]["asked"] is None
    assert not (repo / ".audit-mcp").exists(), "quota, probe included, writes nothing in the repository"


def test_quota_probe_says_why_it_asked_nothing_and_force_refuses_without_an_answer(
    repo: Path, capsys: pytest.CaptureFixture[str], provider: _Provider, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    code, quota, _ = _quota_probe(capsys, repo, "auto")
    assert code == 0 and quota["probe"]["asked"] is None and quota["probe"]["learned"] == {}
    assert "ANTHROPIC_API_KEY is not set" in quota["probe"]["note"]
    code, quota, _ = _quota_probe(capsys, repo, "never")
    assert code == 0 and quota["probe"]["note"] == "provider probe off (--quota-probe never)"
    code, quota, err = _quota_probe(capsys, repo, "force")
    assert code == 1 and quota == {}
    assert "--quota-probe force could not read any limit" in err and "--quota-probe auto" in err
    assert provider.calls == []
