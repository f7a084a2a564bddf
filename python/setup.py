"""Build of the mpiar Python package against an installed libmpiar:

    MPICC=mpicc.openmpi python3 -m pip install --no-build-isolation ./python

libmpiar is found, in this order, through MPIAR_INCLUDE_DIR (one directory or several, separated
by os.pathsep) and MPIAR_LIBRARY_DIR, through MPIAR_PREFIX (its include/ and lib/ directories), or
through pkg-config (mpiar.pc; set PKG_CONFIG_PATH for a non-system prefix). The extension is compiled and linked with the MPI
compiler wrapper MPICC; without it, the wrapper of mpi4py's MPI (mpicc.openmpi for Open MPI,
mpicc.mpich for MPICH) when it exists, else mpi4py's configured mpicc. libmpiar must have been
built with that same MPI; the module checks at import that mpi4py runs on it.
"""

import glob
import os
import re
import shlex
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))


def fail(message):
    sys.exit(f"mpiar setup: {message}")


def pkg_config(*args):
    try:
        out = subprocess.run(["pkg-config", *args, "mpiar"], check=True, capture_output=True,
                             text=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    return shlex.split(out)


def find_libmpiar():
    """The include directories and the library directory of the installed libmpiar."""
    inc, lib = os.environ.get("MPIAR_INCLUDE_DIR"), os.environ.get("MPIAR_LIBRARY_DIR")
    if inc and lib:
        return inc.split(os.pathsep), lib
    prefix = os.environ.get("MPIAR_PREFIX")
    if prefix:
        libs = [d for d in ("lib", "lib64", "lib/x86_64-linux-gnu")
                if glob.glob(os.path.join(prefix, d, "libmpiar.so*"))]
        if not libs:
            fail(f"no libmpiar.so under MPIAR_PREFIX={prefix}")
        return [os.path.join(prefix, "include")], os.path.join(prefix, libs[0])
    cflags, libs = pkg_config("--cflags-only-I"), pkg_config("--libs-only-L")
    if cflags is None or libs is None:
        fail("libmpiar not found: set MPIAR_PREFIX (or MPIAR_INCLUDE_DIR and MPIAR_LIBRARY_DIR), "
             "or PKG_CONFIG_PATH to the directory of mpiar.pc")
    inc = [f[2:] for f in cflags if f.startswith("-I")] or ["/usr/include"]
    lib = next((f[2:] for f in libs if f.startswith("-L")), "/usr/lib")
    return inc, lib


def version(include_dirs):
    """MPIAR_VERSION_MAJOR/MINOR/PATCH from the installed headers."""
    parts = {}
    headers = [h for d in include_dirs for h in glob.glob(os.path.join(d, "mpiar*.h"))]
    for header in headers:
        with open(header) as f:
            for m in re.finditer(r"#define MPIAR_VERSION_(MAJOR|MINOR|PATCH) (\d+)", f.read()):
                parts[m.group(1)] = m.group(2)
    if len(parts) != 3:
        fail(f"no version macros in the mpiar headers of {os.pathsep.join(include_dirs)}")
    return f"{parts['MAJOR']}.{parts['MINOR']}.{parts['PATCH']}"


def find_mpicc():
    """The MPI compiler wrapper: $MPICC, else the one of mpi4py's MPI."""
    if os.environ.get("MPICC"):
        return os.environ["MPICC"]
    import mpi4py
    try:
        from mpi4py import MPI
        vendor = MPI.get_vendor()[0]
    except ImportError:
        vendor = ""
    named = {"Open MPI": "mpicc.openmpi", "MPICH": "mpicc.mpich"}.get(vendor)
    if named and shutil.which(named):
        return named
    return mpi4py.get_config().get("mpicc", "mpicc")


class BuildExt(build_ext):
    """Compile and link with the MPI compiler wrapper, so the extension gets that MPI."""

    def build_extensions(self):
        mpicc = find_mpicc()
        print(f"mpiar setup: compiling with the MPI wrapper {mpicc}")
        for name in ("compiler_so", "linker_so"):
            cmd = list(getattr(self.compiler, name))
            self.compiler.set_executable(name, [mpicc] + cmd[1:])
        super().build_extensions()


def extension(include_dirs, library_dir):
    import mpi4py
    return Extension(
        "mpiar._mpiar",
        sources=sorted(glob.glob(os.path.join("src", "*.c"))),
        include_dirs=include_dirs + [mpi4py.get_include()],
        library_dirs=[library_dir],
        runtime_library_dirs=[library_dir],
        # DT_RPATH, which the loader searches before LD_LIBRARY_PATH (a DT_RUNPATH comes after
        # it): a libmpiar of another build on LD_LIBRARY_PATH must not replace this one.
        extra_link_args=["-Wl,--disable-new-dtags"],
        libraries=["mpiar"],
        define_macros=[("_GNU_SOURCE", None)],
        extra_compile_args=["-std=c11", "-Wall", "-Wextra"],
    )


os.chdir(HERE)
_inc, _lib = find_libmpiar()
setup(
    name="mpiar",
    version=version(_inc),
    description="MPI allreduce built by hand from point-to-point messages (Python bindings)",
    packages=["mpiar"],
    ext_modules=[extension(_inc, _lib)],
    cmdclass={"build_ext": BuildExt},
    python_requires=">=3.9",
    install_requires=["mpi4py>=3"],
    extras_require={"torch": ["torch"], "numpy": ["numpy"]},
)
