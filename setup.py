"""The build steps pyproject.toml cannot declare: rlhealth's optional C extensions and its compiled
signature database.

All project metadata lives in pyproject.toml; this file only adds two C extensions, both optional
(``Extension(..., optional=True)``: a build that cannot compile one says so and installs without
it, and rlhealth runs as without it, giving the same JSON):

- ``rlhealth.probes._linescan`` (the per-match work of the log scan, probes/_linescan.c, used by
  probes/scan.py; without it, or with ``RLHEALTH_PURE_PYTHON=1`` at run time, the scan's Python
  path runs);
- ``rlhealth._pyeval_compat`` (exports ``PyEval_CallObject`` for a durable-rules built on Python
  3.13 without its declaration, see rlhealth/_pyeval_compat.c and rlhealth/durable_loader.py;
  unused when durable-rules was built with the README's ``CPPFLAGS``).

The build also compiles the hyperscan database of the packaged signatures into the built
``rlhealth/rules/compiled/`` (``probes.scan.write_packaged_database``, run from the built tree),
so a diagnosis loads it instead of compiling it (about 0.1 s of CPU per process). It is used only
when its key (hyperscan version, patterns, flags) is the one the run computes and hyperscan
accepts it on the CPU it runs on; otherwise the run compiles, as without it. A build that cannot
compile it (no hyperscan in the build environment) says so and installs without it.

It also validates the packaged knowledge files and stores the catalog there
(``rlhealth.catalog.write_packaged_catalog``: plain data under a key hashing the files and the
validating code), so a diagnosis without operator signature directories skips parsing and
validating 70 files (about 70 ms per process). A run whose key differs (an edited file), or an
operator's signature directories, validates the files as without it. With the catalog it stores
the code Jinja compiles for each rule template and set expression (``rlhealth.templates``), used
when the Jinja and Python of the run are the ones that compiled it (a build environment without
Jinja stores none: the templates compile at run time).
"""
import os
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_py import build_py

_COMPILE_PACKAGED = """
import sys
from pathlib import Path
from rlhealth.probes.patterns import packaged_signature_patterns, scan_patterns
from rlhealth.probes.scan import write_packaged_database
signatures = packaged_signature_patterns()
if signatures is None:
    sys.exit("unreadable signature files")
print(write_packaged_database(list(scan_patterns(signatures)), Path(sys.argv[1])))
"""


_STORE_CATALOG = """
import sys
from pathlib import Path
from rlhealth.catalog import write_packaged_catalog
print(write_packaged_catalog(Path(sys.argv[1])))
"""


class BuildWithDatabase(build_py):
    """``build_py``, then the signature database compiled and the catalog validated and stored,
    both from the built tree."""

    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return          # an editable install runs from the sources and compiles at run time
        rules_dir = os.path.abspath(os.path.join(self.build_lib, "rlhealth", "rules"))
        # the built tree first; then what the build environment put there (pip's isolated build
        # environment reaches its packages, hyperscan among them, through PYTHONPATH)
        path = os.pathsep.join(p for p in (os.path.abspath(self.build_lib), os.environ.get("PYTHONPATH")) if p)
        # the packaged signatures alone: no operator signature directory of the builder's
        env = dict(os.environ, PYTHONPATH=path, PYTHONDONTWRITEBYTECODE="1", RLHEALTH_SIGNATURES="",
                   XDG_CONFIG_HOME=os.path.join(os.path.abspath(self.build_lib), "no-config"))
        done = subprocess.run([sys.executable, "-c", _COMPILE_PACKAGED, rules_dir], env=env,
                              capture_output=True, text=True, cwd=self.build_lib)
        if done.returncode == 0:
            print(f"compiled the signature database: {done.stdout.strip()}")
        else:
            print("rlhealth: the signature database was not compiled at build time (a diagnosis compiles it):\n"
                  + done.stderr.strip()[-2000:], file=sys.stderr)
        done = subprocess.run([sys.executable, "-c", _STORE_CATALOG, rules_dir], env=env,
                              capture_output=True, text=True, cwd=self.build_lib)
        if done.returncode == 0:
            print(f"stored the validated catalog: {done.stdout.strip()}")
        else:
            print("rlhealth: the catalog was not stored at build time (a diagnosis validates the packaged files):\n"
                  + done.stderr.strip()[-2000:], file=sys.stderr)


setup(
    cmdclass={"build_py": BuildWithDatabase},
    ext_modules=[
        Extension("rlhealth._pyeval_compat", sources=["rlhealth/_pyeval_compat.c"], optional=True),
        Extension("rlhealth.probes._linescan", sources=["probes/_linescan.c"], optional=True),
    ],
)
