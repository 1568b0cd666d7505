"""The Google-style docstring reader behind tool descriptions."""

from __future__ import annotations

from actors.loop._docstrings import parse_docstring


def test_empty_docstrings() -> None:
    assert parse_docstring(None) == ("", {})
    assert parse_docstring("") == ("", {})


def test_summary_only() -> None:
    assert parse_docstring("  Do the thing.  ") == ("Do the thing.", {})


def test_summary_is_everything_before_the_first_section() -> None:
    doc = """Fetch a page.

    Follows redirects.

    Args:
        url: Where.

    Returns:
        The body.
    """
    assert parse_docstring(doc) == ("Fetch a page.\n\nFollows redirects.", {"url": "Where."})


def test_types_in_parentheses_and_continuations() -> None:
    doc = """Summary.

    Arguments:
        path (str): The file.
        mode (Literal["r", "w"], optional): How to open it,
            for reading or writing.
        *rest: Ignored by tools, still parsed.
    """
    _, args = parse_docstring(doc)
    assert args == {
        "path": "The file.",
        "mode": "How to open it, for reading or writing.",
        "rest": "Ignored by tools, still parsed.",
    }


def test_description_on_the_next_line() -> None:
    doc = """Summary.

    Args:
        query:
            What to look for.
    """
    assert parse_docstring(doc)[1] == {"query": "What to look for."}


def test_indented_colon_lines_inside_a_description_are_continuations() -> None:
    doc = """Summary.

    Args:
        query: What to look for.
            Example: "pykka actors".
        limit: How many.
    """
    assert parse_docstring(doc)[1] == {
        "query": 'What to look for. Example: "pykka actors".',
        "limit": "How many.",
    }


def test_other_sections_do_not_leak_into_arguments() -> None:
    doc = """Summary.

    Raises:
        ValueError: when bad.

    Args:
        x: The x.

    Example:
        y: not an argument
    """
    assert parse_docstring(doc) == ("Summary.", {"x": "The x."})
