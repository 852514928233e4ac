"""seglog._native: the Cython modules that own every per-byte and per-record loop.

Nothing here imports from ``seglog`` (the engine). Exceptions raised by native code are
created in exactly one place, :mod:`seglog._native._errors`, whose classes the engine
installs at import time.
"""
