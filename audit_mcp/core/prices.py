"""``[prices]``: what the reviewers' model costs, for the forecast's and the report's cost. Nothing is built in.

Prices are per million tokens, in the table's ``currency``::

    [prices]
    currency = "USD"
    [prices."claude-sonnet-4-6"]
    input = 3.0          # uncached input
    output = 15.0
    cache_read = 0.30    # input read from the prompt cache
    cache_write = 3.75   # input written to the prompt cache (default: the input price)

``[prices]`` may also hold ``input``, ``output``, ``cache_read`` and ``cache_write`` itself: the prices of
every model without a table of its own. A model's table is found as ``[model."<name>"]`` is: the exact name,
else the longest table name the model's name starts with (case-insensitive). Prices are set in your own
config (``--config`` or ``AUDIT_MCP_CONFIG``) only: a repository's own config is refused them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

_Price = Annotated[float, Field(ge=0, le=1_000_000)]
PRICE_KEYS = ("input", "output", "cache_read", "cache_write")
_MAX_TABLES = 200


class ModelPrices(BaseModel):
    """One model's prices per million tokens; ``input`` and ``output`` are needed for any cost."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    input: _Price | None = Field(default=None, description="Uncached input, per million tokens.")
    output: _Price | None = Field(default=None, description="Output, per million tokens.")
    cache_read: _Price | None = Field(default=None, description="Input read from the prompt cache, per million tokens.")
    cache_write: _Price | None = Field(
        default=None, description="Input written to the prompt cache, per million tokens (default: the input price)."
    )

    @property
    def complete(self) -> bool:
        return self.input is not None and self.output is not None


class PricesConfig(ModelPrices):
    """``[prices]``: the currency, prices for every model, and ``[prices."<model>"]`` tables over them."""

    currency: Annotated[str, Field(min_length=1, max_length=10)] = Field(
        default="USD", description="The currency the prices are in, as the cost is shown."
    )
    models: dict[Annotated[str, Field(min_length=1, max_length=200)], ModelPrices] = Field(
        default_factory=dict,
        max_length=_MAX_TABLES,
        description='[prices."<model>"] tables: a model\'s own prices, over the ones above key by key.',
    )

    @model_validator(mode="before")
    @classmethod
    def _split_tables(cls, data: Any) -> Any:
        """The TOML shape (model tables beside the keys) into ``models``; a key that is neither is named."""
        if not isinstance(data, Mapping) or "models" in data:
            return data
        flat = {k: v for k, v in data.items() if not isinstance(v, Mapping)}
        unknown = [k for k in flat if k not in (*PRICE_KEYS, "currency")]
        if unknown:
            raise ValueError(
                f"[prices] {unknown[0]}: not a price; [prices] takes currency, {', '.join(PRICE_KEYS)} and "
                '[prices."<model>"] tables of the same keys (per million tokens)'
            )
        return {**flat, "models": {k: v for k, v in data.items() if isinstance(v, Mapping)}}

    def for_model(self, name: str | None) -> tuple[str | None, ModelPrices | None]:
        """The prices of ``name`` and where they came from (``[prices."<table>"]`` or ``[prices]``), key by
        key over ``[prices]``; (None, None) when nothing prices it with both input and output."""
        lowered = (name or "").lower()
        exact = next((k for k in self.models if k.lower() == lowered), None)
        table = exact or max(
            (k for k in self.models if lowered and lowered.startswith(k.lower())), key=len, default=None
        )
        own = self.models.get(table) if table is not None else None
        merged = ModelPrices(
            **{
                k: getattr(own, k) if own is not None and getattr(own, k) is not None else getattr(self, k)
                for k in PRICE_KEYS
            }
        )
        if not merged.complete:
            return None, None
        return (f'[prices."{table}"]' if table is not None else "[prices]"), merged
