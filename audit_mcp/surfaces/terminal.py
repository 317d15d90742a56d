"""Progress on a terminal: one self-overwriting status line, silent when stderr is piped."""

from __future__ import annotations

from typing import TextIO


class TerminalProgress:
    """One self-overwriting status line on a terminal; silent when the stream is not a terminal."""

    def __init__(self, stream: TextIO, width: int = 24) -> None:
        self.stream = stream
        self.width = width
        self.active = stream.isatty()
        self._drawn = False

    def __call__(self, done: float, total: float | None, message: str) -> None:
        if not self.active:
            return
        if total:
            filled = int(self.width * min(done, total) / total)
            gauge = f"[{'#' * filled}{'.' * (self.width - filled)}] {done:g}/{total:g}"
        else:
            gauge = f"[step {done:g}]"
        self.stream.write(f"\r\x1b[Kaudit-mcp: {gauge} {message}")
        self.stream.flush()
        self._drawn = True

    def close(self) -> None:
        if self._drawn:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self._drawn = False
