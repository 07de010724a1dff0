"""The native CPU backend: C generators grouped by op family, gcc, the support
library, its lowering table and its answers to the fusion rewrites."""
