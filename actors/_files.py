"""Writing a file whole or not at all: the library never leaves a partial file behind."""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import IO

__all__ = ["replacing", "write_whole"]


@contextlib.contextmanager
def replacing(path: str | os.PathLike[str]) -> Iterator[IO[str]]:
    """A text file (UTF-8, LF newlines) that replaces ``path`` when the block succeeds.

    It is written under a temporary name in the same folder and renamed over ``path`` at the
    end (atomic on one file system); if the block raises, the temporary file is removed and
    ``path`` is left as it was.
    """
    target = Path(path)
    # Opened exclusively under a fresh name, not by mkstemp: the file gets the permissions a
    # plain open gives (the umask's), as the file it replaces did.
    temporary = target.with_name(f".{target.name}.{secrets.token_hex(6)}.tmp")
    out = open(temporary, "x", encoding="utf-8", newline="\n")  # noqa: SIM115 (closed below)
    try:
        with out:
            yield out
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def write_whole(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` to ``path`` through `replacing`: the old file or the new, never half."""
    with replacing(path) as out:
        out.write(text)
