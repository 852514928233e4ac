"""pytest-benchmark timings of the registry's benchmarks (``seglog.benchmarks``) and the byte-level comparisons."""
