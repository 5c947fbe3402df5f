"""The benchmark tool's package: run it as `python scripts/bench` (see __main__.py and cli.py)."""
