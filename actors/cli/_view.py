"""Showing a tree of agents while it runs: a live rich tree on a terminal, plain lines elsewhere."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Protocol, TextIO

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.spinner import Spinner
from rich.text import Text
from rich.tree import Tree

from actors import TreeNode

__all__ = ["LiveView", "PlainView", "QuietView", "View", "describe", "status_text"]

_STYLE = {
    "idle": ("○", "dim"),
    "running": ("●", "yellow"),
    "suspended": ("⏸", "magenta"),
    "finished": ("✔", "green"),
    "failed": ("✖", "red"),
    "cancelled": ("⊘", "red"),
    "stopped": ("■", "dim"),
}


class View(Protocol):
    """Something that shows the tree as it changes; entered while the run is in flight."""

    def __enter__(self) -> View: ...

    def __exit__(self, *exc: object) -> None: ...

    def update(self, tree: TreeNode) -> None:
        """Show the tree as it stands now."""

    def note(self, text: str) -> None:
        """Show a line of commentary (an approval, a resumed run)."""

    def paused(self) -> AbstractContextManager[None]:
        """Stop drawing while the user is asked something."""


def describe(node: TreeNode) -> str:
    """One agent in one line: ``name (id)  status · step n · → tool``."""
    label = node.name if node.name == node.agent_id else f"{node.name} ({node.agent_id})"
    parts = [node.status]
    if node.step:
        parts.append(f"step {node.step}")
    if node.tool:
        parts.append(f"→ {node.tool}")
    return f"{label}  {' · '.join(parts)}"


def status_text(node: TreeNode, *, icon: bool = True) -> Text:
    """The styled label of one agent (``icon=False`` when a spinner stands in for it)."""
    mark, style = _STYLE.get(node.status, ("?", ""))
    text = Text()
    if icon:
        text.append(f"{mark} ", style=style)
    text.append(node.name, style="bold")
    if node.name != node.agent_id:
        text.append(f" ({node.agent_id})", style="dim")
    text.append(f"  {node.status}", style=style)
    if node.step:
        text.append(f" · step {node.step}", style="dim")
    if node.tool:
        text.append(f" · → {node.tool}", style="cyan")
    return text


def _label(node: TreeNode) -> RenderableType:
    if node.status == "running":
        return Spinner("dots", text=status_text(node, icon=False), style="yellow")
    return status_text(node)


def render_tree(node: TreeNode, into: Tree | None = None) -> Tree:
    """The agent tree as a rich `Tree`."""
    branch = Tree(_label(node)) if into is None else into.add(_label(node))
    for child in node.children:
        render_tree(child, branch)
    return branch


class LiveView:
    """A rich `Live` tree, redrawn in place a dozen times a second."""

    def __init__(self, console: Console, title: str = "") -> None:
        self.console = console
        self.title = title
        self._notes: list[str] = []
        self._tree: TreeNode | None = None
        self._live = Live(
            Text(""), console=console, refresh_per_second=12, transient=False, auto_refresh=True
        )

    def __enter__(self) -> LiveView:
        self._live.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._redraw()
        self._live.stop()

    def _redraw(self) -> None:
        parts: list[RenderableType] = []
        if self.title:
            parts.append(Text(self.title, style="bold"))
        if self._tree is not None:
            parts.append(render_tree(self._tree))
        parts.extend(Text(note, style="magenta") for note in self._notes)
        self._live.update(Group(*parts))

    def update(self, tree: TreeNode) -> None:
        """Redraw with the tree as it stands now."""
        self._tree = tree
        self._redraw()

    def note(self, text: str) -> None:
        """Add a line under the tree."""
        self._notes.append(text)
        self._redraw()

    @contextmanager
    def paused(self) -> Iterator[None]:
        """Stop the live display while the user types."""
        self._live.stop()
        try:
            yield
        finally:
            self._live.start()


class PlainView:
    """One line per change of an agent's status, step or tool: for logs and pipes."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stdout
        self._seen: dict[str, str] = {}

    def __enter__(self) -> PlainView:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def _print(self, text: str) -> None:
        print(text, file=self.stream, flush=True)

    def update(self, tree: TreeNode) -> None:
        """Print a line for every agent that changed since the last update."""
        for node in tree.walk():
            line = describe(node)
            if self._seen.get(node.agent_id) != line:
                self._seen[node.agent_id] = line
                self._print(f"[agent] {line}")

    def note(self, text: str) -> None:
        """Print a line of commentary."""
        self._print(text)

    @contextmanager
    def paused(self) -> Iterator[None]:
        """Nothing to pause."""
        yield


class QuietView(PlainView):
    """Shows no progress, only notes (``actors run`` in a pipe prints just its output)."""

    def update(self, tree: TreeNode) -> None:
        """Show nothing."""
