"""Rows of numbers, and the ways out of a simulation: DataFrames, CSV, Parquet.

A table is a list of plain dicts (one per row) with a fixed column order. pandas, polars and
pyarrow are optional: each is imported only when asked for, and a missing one is a clear
`UserError` naming what to install.
"""

from __future__ import annotations

import csv
import importlib
import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from actors.exceptions import UserError
from actors.sim._chart import svg_chart

__all__ = ["Table", "to_csv", "to_dataframe", "to_parquet"]


class Table:
    """Rows with named columns, in order (what `Simulation.rows` and `sweep` return).

    Attributes:
        columns: The column names, in order.
        rows: One dict per row (a missing column reads as None).
    """

    def __init__(self, columns: Sequence[str], rows: Sequence[dict[str, Any]]) -> None:
        self.columns = list(columns)
        self.rows = [dict(row) for row in rows]

    def __len__(self) -> int:
        return len(self.rows)

    def __iter__(self) -> Any:
        return iter(self.rows)

    def __getitem__(self, index: int) -> dict[str, Any]:
        return self.rows[index]

    def column(self, name: str) -> list[Any]:
        """The values of one column, in row order."""
        if name not in self.columns:
            raise UserError(f"no column {name!r}; the columns are {self.columns}")
        return [row.get(name) for row in self.rows]

    def to_dataframe(self, library: str = "auto") -> Any:
        """The table as a pandas or polars DataFrame (``library``: auto, pandas or polars)."""
        return to_dataframe(self, library)

    def to_csv(self, path: str | Path | None = None) -> str:
        """Write CSV to ``path`` (or return it as text when None)."""
        return to_csv(self, path)

    def to_parquet(self, path: str | Path) -> None:
        """Write Parquet (needs pyarrow: ``pip install 'actors[sim]'``)."""
        to_parquet(self, path)

    def to_svg(self, path: str | Path | None = None, *, title: str = "") -> str:
        """A line chart of the numeric columns over ``time`` as SVG; written to ``path`` too."""
        text = svg_chart(self, title=title)
        if path is not None:
            Path(path).write_text(text, encoding="utf-8")
        return text

    def __repr__(self) -> str:
        return f"<Table {len(self.rows)} rows x {len(self.columns)} columns {self.columns}>"


def _optional(module: str, purpose: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError:
        raise UserError(
            f"{purpose} needs {module}, which is not installed: pip install {module} "
            "(or pip install 'actors[sim]')"
        ) from None


def to_dataframe(table: Table, library: str = "auto") -> Any:
    """A pandas DataFrame (or polars, if pandas is missing or asked for)."""
    if library not in ("auto", "pandas", "polars"):
        raise UserError(f"library must be 'auto', 'pandas' or 'polars', got {library!r}")
    data = {name: table.column(name) for name in table.columns}
    if library == "auto":
        for name in ("pandas", "polars"):
            try:
                module = importlib.import_module(name)
            except ImportError:
                continue
            return module.DataFrame(data)
        raise UserError(
            "a DataFrame needs pandas or polars, and neither is installed: pip install pandas"
        )
    module = _optional(library, "a DataFrame")
    return module.DataFrame(data)


def to_csv(table: Table, path: str | Path | None = None) -> str:
    """The table as CSV text; written to ``path`` too when given."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=table.columns, lineterminator="\n")
    writer.writeheader()
    for row in table.rows:
        writer.writerow({name: row.get(name) for name in table.columns})
    text = buffer.getvalue()
    if path is not None:
        Path(path).write_text(text, encoding="utf-8")
    return text


def to_parquet(table: Table, path: str | Path) -> None:
    """Write the table as a Parquet file (pyarrow)."""
    pyarrow = _optional("pyarrow", "Parquet export")
    parquet = importlib.import_module("pyarrow.parquet")
    data = {name: table.column(name) for name in table.columns}
    parquet.write_table(pyarrow.table(data), str(path))
