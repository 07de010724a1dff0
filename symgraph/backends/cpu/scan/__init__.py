"""Compiled loops for scan (see ``scalar_loop.py``)."""
