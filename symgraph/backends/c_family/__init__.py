"""The C family's shared layer: what the CPU's C and CUDA's C both use (dtype tables,
literal formatting, string escaping, scalar ops' C expressions)."""
