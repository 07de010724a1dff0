"""Helper modules of ``symgraph.gradient`` (import the public names from there).

``grad_ops``: identity ops that shape gradients (zero_grad, grad_clip, ...);
``rop``: forward mode (Rop); ``verify``: finite-difference checks (verify_grad).
"""
