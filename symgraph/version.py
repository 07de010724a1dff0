"""symgraph's version: the one place it is written (setup.cfg reads it; cache keys
include it, so a new release never loads an older release's kernels)."""

__version__ = "0.1.0"
