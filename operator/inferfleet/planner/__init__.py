"""Sizing planner: memory math, quantization, parallelism, fleet sizing (pure)."""
