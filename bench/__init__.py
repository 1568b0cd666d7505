"""Benchmarks of actors against a raw pykka floor and its peers: ``python -m bench``.

Each section is a script that runs on its own (``python bench/fanout.py --quick``) and writes
its figures as JSON with ``--json PATH``; `bench.run` runs every section in a fresh interpreter
and prints one table. See docs/benchmarks.md.
"""
