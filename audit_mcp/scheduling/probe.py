"""An optional look at the provider itself: the model's context window and its rate-limit headers.

Mode ``never`` (the default) makes no request; ``auto`` asks only when the
provider's API key is in the environment; ``force`` asks, or says why it
could not. Values read here are ``high`` confidence when they come from
rate-limit headers and ``medium`` when they come from the model listing.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from audit_mcp.scheduling.limits import Limit
from audit_mcp.scheduling.ratelimits import parse_headers

_ENDPOINTS = {
    "anthropic": ("ANTHROPIC_API_KEY", "https://api.anthropic.com/v1/models/{model}"),
    "openai": ("OPENAI_API_KEY", "https://api.openai.com/v1/models/{model}"),
}
_CONTEXT_FIELDS = {
    "max_input_tokens": "context_tokens",
    "context_window": "context_tokens",
    "max_tokens": "output_tokens",
    "max_output_tokens": "output_tokens",
}
TIMEOUT_SECONDS = 10.0

if TYPE_CHECKING:
    import httpx


@dataclass(frozen=True)
class ProbeResult:
    limits: dict[str, Limit] = field(default_factory=dict)
    note: str = ""


def probe(
    provider: str,
    model: str,
    mode: str,
    now: datetime,
    *,
    env: Mapping[str, str] | None = None,
    transport: httpx.BaseTransport | None = None,
) -> ProbeResult:
    """Ask the provider about ``model`` when ``mode`` allows; never raises for network trouble."""
    if mode == "never":
        return ProbeResult(note="provider probe off (probe = never)")
    environ = os.environ if env is None else env
    if provider not in _ENDPOINTS:
        return ProbeResult(note=f"no probe is known for provider {provider!r}")
    key_name, url = _ENDPOINTS[provider]
    key = environ.get(key_name, "").strip()
    if not key:
        return ProbeResult(
            note=f"provider probe skipped: {key_name} is not set"
            + (" (probe = force needs it)" if mode == "force" else "")
        )
    headers = (
        {"x-api-key": key, "anthropic-version": "2023-06-01"}
        if provider == "anthropic"
        else {"authorization": f"Bearer {key}"}
    )
    import httpx  # only when a probe is made: it is the slowest import of the package

    try:
        with httpx.Client(transport=transport, timeout=TIMEOUT_SECONDS) as client:
            response = client.get(url.format(model=model), headers=headers)
    except httpx.HTTPError as exc:
        return ProbeResult(note=f"provider probe failed: {type(exc).__name__}: {exc}")
    found: dict[str, Limit] = {}
    signal = parse_headers(dict(response.headers), now, status=response.status_code)
    for name, value in signal.limits.items():
        found[name] = Limit(value, f"{provider} rate-limit headers (probe)", "high")
    if response.status_code == 200:
        try:
            body = response.json()
        except ValueError:
            body = {}
        for source, name in _CONTEXT_FIELDS.items():
            raw = body.get(source) if isinstance(body, dict) else None
            if isinstance(raw, int) and raw > 0 and name not in found:
                found[name] = Limit(raw, f"{provider} models API (probe)", "medium")
        return ProbeResult(found, f"provider probe read {len(found)} value(s)")
    return ProbeResult(found, f"provider probe answered HTTP {response.status_code}")
