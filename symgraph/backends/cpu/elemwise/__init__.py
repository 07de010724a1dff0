"""CPU C for element-wise loops (fused composites of scalar ops)."""
