"""The MCP tools' and prompts' parameters, each with the description a host's model reads in the schema."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, SkipValidation, WithJsonSchema

from audit_mcp.engine.inputs import Failure, TaskResult, Usage, lean_schema

Root = Annotated[
    str | None,
    Field(description="Absolute path of the repository; leave it out for the server's own (its --root)."),
]
PromptRoot = Annotated[
    str,
    Field(description="Absolute path of the repository; empty for the server's configured root."),
]
RunId = Annotated[
    str,
    Field(description="The run's id, as the step and its dispatch plan give it (e.g. A1-R2-3f9c2a)."),
]
PacketId = Annotated[
    str,
    Field(description="The packet's id from the dispatch plan or its prompt (e.g. A1-R2-3f9c2a-P03)."),
]
CanDispatch = Annotated[
    bool | None,
    Field(description="Capability answer: can this host launch subagents (parallel workers with their own context)?"),
]
CanRestrict = Annotated[
    bool | None,
    Field(description="Capability answer: can this host limit which tools a subagent may use?"),
]
CanSelectModel = Annotated[
    bool | None,
    Field(description="Capability answer: can this host choose the model of each subagent?"),
]
MaxActive = Annotated[
    int | None,
    Field(ge=1, le=64, description="Capability answer: how many subagents this host runs at once at most (1-64)."),
]
HostModel = Annotated[
    str | None,
    Field(description="The model the host and its subagents run (e.g. claude-sonnet-4-6); sizes packets and waves."),
]
NewAudit = Annotated[
    bool,
    Field(description="Start a fresh audit of the repository after a finished one (unchanged files carry forward)."),
]
RetryBlocked = Annotated[
    bool,
    Field(description="Clear the blocker of a blocked audit once its cause is fixed, and go on."),
]
Since = Annotated[
    str | None,
    Field(description="A git ref: an audit that starts in this call reviews only the files changed since it."),
]
AnalyzerResults = Annotated[
    list[Annotated[str, Field(min_length=1, max_length=1_000)]] | None,
    Field(
        description="Files of static-analyzer output whose alerts become leads for the reviewers: SARIF from any "
        "analyzer, `bandit -f json` or `semgrep --json` (told apart by their content). Paths inside the "
        "repository, relative to its root. Read when an audit starts (with new_audit for a new one).",
        max_length=100,
    ),
]
Provider = Annotated[
    str | None,
    Field(description="The model's provider (anthropic, openai, google) when the model name does not say."),
]
Results = Annotated[
    list[TaskResult] | str,
    SkipValidation,  # the server checks it (and says where and how to fix it), by these same models
    # The shape, bounds and choices of these models without their field descriptions, which every packet prompt
    # gives its reviewer in full: the schema every host conversation carries stays small.
    WithJsonSchema({"anyOf": [lean_schema(list[TaskResult]), {"type": "string"}]}),
    Field(
        description="One result per task of the packet, as the packet prompt describes it (or that array as a JSON "
        'string; {"results": [...], "usage": {...}} is read too).'
    ),
]
# validate_results takes what submit_packet takes; its schema points there instead of repeating it.
ResultsToCheck = Annotated[
    list[TaskResult] | str,
    SkipValidation,
    WithJsonSchema({"type": ["array", "string"]}),
    Field(description="The results exactly as submit_packet would take them (its schema describes them)."),
]
UsageToCheck = Annotated[
    Usage | None,
    SkipValidation,
    WithJsonSchema({"type": "object"}),
    Field(description="The usage exactly as submit_packet would take it."),
]
UsageIn = Annotated[
    Usage | None,
    SkipValidation,
    WithJsonSchema({"anyOf": [lean_schema(Usage), {"type": "null"}]}),
    Field(description="What this review cost, as far as known; leave out what you do not know."),
]
Failures = Annotated[
    list[Failure] | None,
    SkipValidation,
    Field(description="The packets whose subagent failed; a packet neither submitted nor listed counts as failed."),
]
FailuresSoFar = Annotated[
    list[Failure] | None,
    SkipValidation,
    Field(
        description="The packets of the run that failed so far: they teach the scheduler at once and are "
        "remembered for merge_and_ingest."
    ),
]
Launched = Annotated[
    list[str] | None,
    Field(max_length=2_000, description="The packet ids already started (so that only the others are listed)."),
]
DispatchMode = Annotated[
    Literal["rolling", "whole_wave"] | None,
    Field(
        description="Capability answer: rolling if the host starts the next subagent as soon as one finishes, "
        "whole_wave if it waits for every subagent of a wave; the run is planned and its prompt written for it."
    ),
]
FindingRef = Annotated[
    str,
    Field(description="The finding's id in the report (e.g. F003) or one of its fingerprints (20 hex characters)."),
]
EvidenceVerdict = Annotated[
    Literal["reproduced", "not_reproduced"],
    Field(description="reproduced: running the code showed the defect; not_reproduced: it did not."),
]
EvidenceOutput = Annotated[
    str,
    Field(description="What running it printed (stdout and stderr), the failing test's report or the crash log."),
]
EvidenceCommand = Annotated[
    str | None,
    Field(max_length=2_000, description="The exact command that was run (up to 2,000 characters)."),
]
EvidenceKind = Annotated[
    Literal["reproduction", "failing_test", "crash_log", "log"],
    Field(description="What the output is: a reproduction, a failing test, a crash log, or another log."),
]
PromptFinding = Annotated[str, Field(description="The finding's id in the report (e.g. F003) or a fingerprint.")]
