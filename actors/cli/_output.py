"""Printing results: rich on a terminal, plain aligned text in a pipe."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from rich.console import Console
from rich.table import Table
from rich.text import Text

__all__ = ["Output"]


class Output:
    """Where the command prints: a rich console, or plain ``print`` when ``console`` is None.

    Plain output is never wrapped or styled, so it can be piped and grepped.
    """

    def __init__(self, console: Console | None) -> None:
        self.console = console

    @classmethod
    def for_stdout(cls, *, plain: bool) -> Output:
        """Rich when stdout is a terminal and ``plain`` is false."""
        if plain or not sys.stdout.isatty():
            return cls(None)
        return cls(Console(highlight=False))

    @property
    def rich(self) -> bool:
        """Whether output goes through rich."""
        return self.console is not None

    def line(self, text: str = "", style: str = "") -> None:
        """Print one line (styled on a terminal)."""
        if self.console is None:
            print(text, flush=True)
        else:
            self.console.print(Text(text, style=style))

    def heading(self, text: str) -> None:
        """Print a section heading."""
        if self.console is None:
            print(f"\n{text}", flush=True)
        else:
            self.console.print()
            self.console.rule(Text(text, style="bold"), align="left")

    def table(self, headers: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
        """Print rows under headers; numbers are right-aligned."""
        cells = [[str(c) for c in row] for row in rows]
        numeric = [
            bool(rows) and all(isinstance(row[i], int | float) for row in rows)
            for i in range(len(headers))
        ]
        if self.console is not None:
            table = Table(box=None, header_style="bold", pad_edge=False)
            for header, is_number in zip(headers, numeric, strict=True):
                table.add_column(header, justify="right" if is_number else "left")
            for row in cells:
                table.add_row(*row)
            self.console.print(table)
            return
        widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]

        def fmt(row: Sequence[str]) -> str:
            return "  ".join(
                (c.rjust(w) if n else c.ljust(w))
                for c, w, n in zip(row, widths, numeric, strict=True)
            ).rstrip()

        print(fmt(list(headers)), flush=True)
        for row in cells:
            print(fmt(row), flush=True)
