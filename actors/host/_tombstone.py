"""`TreeNode`, the view of a tree; and what a host keeps of an agent that ended.

Enough for its parent's tree view, nothing more.

A long-lived runtime must hold memory for its live agents only: an ended child keeps no spec,
no `tool_context`, no log; its parent's ``ref.tree()`` still shows how it ended.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

__all__ = ["Tombstone", "TreeNode"]


class _Record(Protocol):
    """What a tombstone keeps of an agent's record (`AgentNode`)."""

    agent_id: str
    name: str
    parent_id: str | None
    status: str
    step: int
    children: list[str]


@dataclass(frozen=True, slots=True)
class TreeNode:
    """One agent of a live tree, as ``ref.tree()`` reports it.

    Attributes:
        agent_id: The agent's id.
        name: Its spec's name.
        parent_id: Its parent's id, or None at the root.
        status: ``idle``, ``running``, ``suspended``, ``finished``, ``failed``, ``cancelled``
            or ``stopped``.
        step: The model request the current run is at.
        tool: The tool (or subagent) in progress, or None.
        children: The children, in spawn order.
    """

    agent_id: str
    name: str
    parent_id: str | None
    status: str
    step: int
    tool: str | None
    children: tuple[TreeNode, ...]

    def walk(self) -> list[TreeNode]:
        """This node and every descendant, depth first."""
        out = [self]
        for child in self.children:
            out.extend(child.walk())
        return out


@dataclass(frozen=True, slots=True)
class Tombstone:
    """An ended agent, as its live parent's tree shows it."""

    agent_id: str
    name: str
    parent_id: str | None
    status: str
    step: int
    children: tuple[str, ...]

    @classmethod
    def of(cls, node: _Record) -> Tombstone:
        """The tombstone of ``node``."""
        return cls(
            node.agent_id, node.name, node.parent_id, node.status, node.step, tuple(node.children)
        )

    def view(self, ended: Mapping[str, Tombstone]) -> TreeNode:
        """Its `TreeNode`, with the children its tree still recalls."""
        return TreeNode(
            self.agent_id,
            self.name,
            self.parent_id,
            self.status,
            self.step,
            None,
            tuple(ended[c].view(ended) for c in self.children if c in ended),
        )
