"""gpufix: diagnose and remediate multi-GPU PyTorch start-up hangs on Linux GPU hosts."""

__version__ = "0.2.0"
