"""Build script for kfast's Cython kernels.

Every ``kfast/_ext/*.pyx`` becomes an extension module ``kfast._ext.<name>``.

Options (``python setup.py build_ext ...``):
  --cython-annotate          write the HTML annotation next to each .pyx
  --cython-directives=a=b,.. extra Cython compiler directives
Environment:
  KFAST_DEBUG=1              compile with KFAST_DEBUG set (debug-only invariant
                             checks, Cython bounds checks on, -O0 -g)
  KFAST_EXTENSIONS=a,b       build only these kernels (development convenience
                             when several people edit different kernels)
  KFAST_BUILD_JOBS=N         compile N kernels at a time (default: one per CPU;
                             `build_ext -j N` says the same on the command line)
"""

import glob
import os
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext as _build_ext

HERE = os.path.dirname(os.path.abspath(__file__))
DEBUG = os.environ.get("KFAST_DEBUG", "") not in ("", "0")


def _extensions():
    only = {n for n in os.environ.get("KFAST_EXTENSIONS", "").split(",") if n}
    exts = []
    for pyx in sorted(glob.glob(os.path.join("kfast", "_ext", "*.pyx"))):
        name = os.path.splitext(os.path.basename(pyx))[0]
        if only and name not in only:
            continue
        cflags = ["-O0", "-g"] if DEBUG else ["-O3"]
        if sys.platform != "win32":
            cflags += ["-std=c99", "-Wno-unused-function"]
        exts.append(
            Extension(
                f"kfast._ext.{name}",
                [pyx],
                include_dirs=[os.path.join("kfast", "_ext")],
                extra_compile_args=cflags,
                define_macros=[("KFAST_DEBUG", "1" if DEBUG else "0")],
            )
        )
    return exts


class build_ext(_build_ext):
    user_options = _build_ext.user_options + [
        ("cython-annotate", None, "write Cython HTML annotation files"),
        ("cython-directives=", None, "extra Cython directives, e.g. profile=True"),
    ]
    boolean_options = _build_ext.boolean_options + ["cython-annotate"]

    def initialize_options(self):
        super().initialize_options()
        self.cython_annotate = False
        self.cython_directives = None

    def finalize_options(self):
        if set(self.distribution.commands) <= {"sdist", "egg_info"}:
            # An sdist ships the .pyx sources (MANIFEST.in) and asks build_ext
            # only for its source list: no Cython run, no generated C written
            # next to the .pyx of the tree it is made from.
            super().finalize_options()
            return
        from Cython.Build import cythonize

        directives = {
            "language_level": 3,
            "boundscheck": DEBUG,
            "wraparound": False,
            "initializedcheck": DEBUG,
            "cdivision": True,
            "embedsignature": True,
        }
        if self.cython_directives:
            for item in self.cython_directives.split(","):
                key, _, value = item.partition("=")
                directives[key.strip()] = value.strip()
        self.distribution.ext_modules = cythonize(
            self.distribution.ext_modules,
            compiler_directives=directives,
            compile_time_env={"KFAST_DEBUG": DEBUG},
            annotate=self.cython_annotate,
            nthreads=int(os.environ.get("KFAST_CYTHON_THREADS", "0")),
        )
        super().finalize_options()
        if self.parallel is None:
            # The kernels are independent translation units: compile them side
            # by side, one per CPU (pip and `python -m build` pass no -j).
            # True means os.cpu_count().
            self.parallel = int(os.environ.get("KFAST_BUILD_JOBS", "0")) or True


setup(ext_modules=_extensions(), cmdclass={"build_ext": build_ext})
