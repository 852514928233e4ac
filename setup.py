"""Build the Cython extensions in ``_native/`` as ``seglog._native.*``.

Two build profiles, chosen by the environment variable ``SEGLOG_DEBUG``:

* release (default): bounds and wraparound checks off, ``-O3``. Every native entry point
  checks its own bounds explicitly, so the directives are not needed for safety.
* debug (``SEGLOG_DEBUG=1``): Cython's bounds, wraparound, initialisation and overflow
  checks on, ``-O1 -g``, and the C macro ``SEGLOG_DEBUG`` defined (enables C assertions).

Generated C goes to ``build/cython-<profile>/`` so switching profiles always regenerates it.

Editable installs (``pip install -e .``) map seglog's packages through setuptools' import
hook, which ``pkgutil.iter_modules()`` cannot list. PySpark finds data sources by listing
top-level ``pyspark_*`` modules that way, so an editable install also puts the directory that
holds the top-level modules (``pyspark_seglog.py`` and the command's entry point
``_seglog_command.py``, nothing else) on ``sys.path`` with a ``.pth`` file.
"""

import glob
import os
import shutil

from Cython.Build import cythonize
from setuptools import Extension, setup

try:
    from setuptools.command.editable_wheel import editable_wheel as _editable_wheel
except ImportError:  # setuptools without PEP 660 support
    _editable_wheel = None

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

# A cimport names the runtime module (``from seglog._native.builder cimport BatchBuilder``), and
# a module's own .pxd is looked up by its full name too, so Cython must find the .pxd files as
# ``seglog/_native/*.pxd``. The sources live in ``_native/`` (the package mapping in
# pyproject.toml); a link build/cython-include/seglog/_native -> _native gives Cython that
# layout (a copy of the .pxd files where links cannot be made).
PXD_ROOT = os.path.join("build", "cython-include")


def _pxd_tree() -> None:
    target = os.path.join(PXD_ROOT, "seglog", "_native")
    os.makedirs(os.path.dirname(target), exist_ok=True)
    if os.path.islink(target):
        return
    try:
        os.symlink(os.path.join(os.pardir, os.pardir, os.pardir, "_native"), target, target_is_directory=True)
    except OSError:
        os.makedirs(target, exist_ok=True)
        for name in glob.glob(os.path.join("_native", "*.pxd")) + [os.path.join("_native", "__init__.py")]:
            shutil.copy2(name, target)


_pxd_tree()
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

DISCOVERY_DIR = os.path.join(here, "bindings", "toplevel")
cmdclass = {}

if _editable_wheel is not None and hasattr(_editable_wheel, "_select_strategy"):

    class _WithDiscoveryPath:
        """Wraps setuptools' editable strategy: also writes a .pth naming DISCOVERY_DIR."""

        def __init__(self, inner, name):
            self.inner = inner
            self.name = name

        def __enter__(self):
            self.inner.__enter__()
            return self

        def __exit__(self, *exc):
            return self.inner.__exit__(*exc)

        def __call__(self, wheel, files, mapping):
            self.inner(wheel, files, mapping)
            wheel.writestr(f"__editable__.{self.name}.pyspark_discovery.pth", (DISCOVERY_DIR + "\n").encode("utf-8"))

    class EditableWheelWithDiscoveryPath(_editable_wheel):
        def _select_strategy(self, name, tag, build_lib):
            return _WithDiscoveryPath(super()._select_strategy(name, tag, build_lib), name)

    cmdclass["editable_wheel"] = EditableWheelWithDiscoveryPath

setup(
    cmdclass=cmdclass,
    ext_modules=cythonize(
        extensions,
        compiler_directives=directives,
        build_dir=os.path.join("build", f"cython-{PROFILE}"),
        # The profile is part of build_dir, so a profile switch regenerates; within one
        # profile Cython's own timestamp check decides.
        include_path=["_native", os.path.join("_native", "include"), PXD_ROOT],
    ),
)
