"""Tests of actors.trace (not named ``trace``: that would shadow the standard library's)."""
