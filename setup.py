"""Build the Cython extensions in ``_native/`` as ``seglog._native.*``.

Two build profiles, chosen by the environment variable ``SEGLOG_DEBUG``:

* release (default): bounds and wraparound checks off, ``-O3``. Every native entry point
  checks its own bounds explicitly, so the directives are not needed for safety.
* debug (``SEGLOG_DEBUG=1``): Cython's bounds, wraparound, initialisation and overflow
  checks on, ``-O1 -g``, and the C macro ``SEGLOG_DEBUG`` defined (enables C assertions).

Generated C goes to ``build/cython-<profile>/`` so switching profiles always regenerates it.
"""

import glob
import os

from Cython.Build import cythonize
from setuptools import Extension, setup

DEBUG = os.environ.get("SEGLOG_DEBUG", "") not in ("", "0")
PROFILE = "debug" if DEBUG else "release"

directives = {
    "language_level": 3,
    "boundscheck": DEBUG,
    "wraparound": DEBUG,
    "initializedcheck": DEBUG,
    "overflowcheck": DEBUG,
    "cdivision": not DEBUG,
    "embedsignature": True,
}

if DEBUG:
    cflags = ["-O1", "-g", "-UNDEBUG", "-DSEGLOG_DEBUG=1"]
else:
    cflags = ["-O3", "-DNDEBUG"]

here = os.path.dirname(os.path.abspath(__file__))
extensions = []
for pyx in sorted(glob.glob(os.path.join("_native", "*.pyx"))):
    name = os.path.splitext(os.path.basename(pyx))[0]
    extensions.append(
        Extension(
            f"seglog._native.{name}",
            [pyx],
            include_dirs=[os.path.join("_native", "include"), "_native"],
            extra_compile_args=cflags + ["-Wno-unused-function"],
        )
    )

setup(
    ext_modules=cythonize(
        extensions,
        compiler_directives=directives,
        build_dir=os.path.join("build", f"cython-{PROFILE}"),
        # The profile is part of build_dir, so a profile switch regenerates; within one
        # profile Cython's own timestamp check decides.
        include_path=["_native"],
    ),
)
