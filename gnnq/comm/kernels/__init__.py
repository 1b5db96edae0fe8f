"""Quantization kernels: a vectorized torch path (CPU and reference) and Triton kernels (GPU)."""
