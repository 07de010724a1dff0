"""symgraph on the GPU: ``device=cuda`` moves graphs there (``gpu.emulate=True``
runs the same CUDA on the CPU where there is no GPU).

``is_available()`` says whether a GPU can be used; ``placement_report(f)``
lists where a compiled function's nodes run and the transfers between host
and device.
"""

from symgraph.gpu.placement import PlacementReport, placement_report

__all__ = ["is_available", "placement_report", "PlacementReport"]


def is_available():
    """True when the NVIDIA driver is installed and sees at least one GPU
    (a ctypes probe: nothing heavy is imported)."""
    from symgraph.backends.cuda.device import driver_available

    return driver_available() > 0
