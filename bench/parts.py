"""Parts: a session of screenshots in an SQLite store, against the same session in text.

    .venv/bin/python -m bench.parts [--quick] [--json PATH]

Session: one agent's log of 100 user messages, each with a 50 kB PNG screenshot (60 distinct,
40 repeated) and a line of text, appended in batches of 10 to an SQLite store, then loaded
back. The baseline is the same session with each screenshot replaced by text of the same
length as its base64, measured in the same run. Reported: the bytes of the stored event
payloads, the file's size, and the append and load times, each side's best of three.

Also: building one 20 MB document part from its bytes, and its SHA-256 (what a store keys it
by), the costs a user pays once per file.

Target (issue 30): a transcript with 100 screenshots stays a small log: its event payloads
hold references, not content (≤ 1 % of the text baseline's payloads).
"""

from __future__ import annotations

import os
import sqlite3
import sys
import tempfile
import time
import zlib
from pathlib import Path
from typing import Any

if not __package__:  # run as a script: make `bench` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import finish, fmt_time, parser

MESSAGES = 100
DISTINCT = 60
QUICK_MESSAGES = 10
QUICK_DISTINCT = 6
IMAGE_BYTES = 50_000
DOCUMENT_BYTES = 20_000_000
TRIALS = 3
TARGET_RATIO = 0.01


def png(seed: int, size: int) -> bytes:
    """A valid PNG of about ``size`` bytes: a header, then an IDAT chunk of noise."""
    body = os.urandom(size - 64) + seed.to_bytes(4, "big")
    chunk = b"IDAT" + body
    crc = zlib.crc32(chunk).to_bytes(4, "big")
    return b"\x89PNG\r\n\x1a\n" + len(body).to_bytes(4, "big") + chunk + crc


def session(images: list[bytes], messages: int, *, as_text: bool) -> Any:
    from actors import AgentContext, ImagePart, UserMessage

    ctx = AgentContext(agent_id="root")
    for n in range(messages):
        image = ImagePart(data=images[n % len(images)], media_type="image/png")
        if as_text:
            content: Any = f"screenshot {n}: " + (image.data or "")
        else:
            content = [f"screenshot {n}", image]
        ctx.add_message(UserMessage(content=content))
    return ctx


def measure(ctx: Any) -> dict[str, Any]:
    from actors.store import AgentRecord, SQLiteStore

    best: dict[str, Any] = {}
    for _ in range(TRIALS):
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "s.sqlite"
            with SQLiteStore(path) as store:
                store.create_session("s", root_agent_id="root")
                store.put_agent("s", AgentRecord("root", None, "root", "idle"))
                events = list(ctx.events)
                began = time.perf_counter()
                for start in range(0, len(events), 10):
                    store.append_events("s", "root", events[start : start + 10])
                appended = time.perf_counter() - began
                began = time.perf_counter()
                loaded = store.read_events("s", "root")
                load = time.perf_counter() - began
                assert len(loaded) == len(events)
            with sqlite3.connect(path) as conn:
                payloads = conn.execute("SELECT SUM(LENGTH(data)) FROM events").fetchone()[0]
            size = path.stat().st_size
        if not best or appended + load < best["append_s"] + best["load_s"]:
            best = {"append_s": appended, "load_s": load, "payload_bytes": payloads}
        best["file_bytes"] = size
    return best


def main() -> int:
    args = parser(__doc__).parse_args()
    messages = QUICK_MESSAGES if args.quick else MESSAGES
    distinct = QUICK_DISTINCT if args.quick else DISTINCT
    images = [png(seed, IMAGE_BYTES) for seed in range(distinct)]
    parts = measure(session(images, messages, as_text=False))
    text = measure(session(images, messages, as_text=True))

    from actors import DocumentPart

    document = b"%PDF-1.7\n" + os.urandom((1_000_000 if args.quick else DOCUMENT_BYTES) - 9)
    began = time.perf_counter()
    part = DocumentPart(data=document, media_type="application/pdf")
    built = time.perf_counter() - began
    began = time.perf_counter()
    _ = part.sha256
    hashed = time.perf_counter() - began

    ratio = parts["payload_bytes"] / text["payload_bytes"]
    payload = {
        "messages": messages,
        "distinct": distinct,
        "image_bytes": IMAGE_BYTES,
        "parts": parts,
        "text": text,
        "payload_ratio": ratio,
        "target_ratio": TARGET_RATIO,
        "document": {"bytes": len(document), "build_s": built, "sha256_s": hashed},
    }

    def report() -> str:
        mb = 1_000_000
        return "\n".join(
            [
                f"## Parts: {messages} screenshots of {IMAGE_BYTES // 1000} kB "
                f"({distinct} distinct) in SQLite",
                "",
                "| | event payloads | file | append | load |",
                "| --- | ---: | ---: | ---: | ---: |",
                f"| parts (blobs by hash) | {parts['payload_bytes'] / mb:.2f} MB "
                f"| {parts['file_bytes'] / mb:.1f} MB | {fmt_time(parts['append_s'])} "
                f"| {fmt_time(parts['load_s'])} |",
                f"| the same as text (baseline) | {text['payload_bytes'] / mb:.2f} MB "
                f"| {text['file_bytes'] / mb:.1f} MB | {fmt_time(text['append_s'])} "
                f"| {fmt_time(text['load_s'])} |",
                "",
                f"Payloads: {ratio:.2%} of the baseline (target <= {TARGET_RATIO:.0%}). "
                f"A {len(document) / mb:.0f} MB document part: built in {fmt_time(built)}, "
                f"hashed in {fmt_time(hashed)}.",
            ]
        )

    return finish(payload, args.json, report)


if __name__ == "__main__":
    sys.exit(main())
