"""The build steps pyproject.toml cannot declare: rlhealth's two C extensions.

All project metadata lives in pyproject.toml; this file only adds ``rlhealth._pyeval_compat``
(see rlhealth/_pyeval_compat.c and rlhealth/durable_loader.py) and ``rlhealth._linescan`` (the
per-match work of the log scan, see rlhealth/_linescan.c and probes/scan.py), built by a plain
``pip install .`` (durable-rules needs a C compiler anyway).
"""
from setuptools import Extension, setup

setup(ext_modules=[
    Extension("rlhealth._pyeval_compat", sources=["rlhealth/_pyeval_compat.c"]),
    Extension("rlhealth._linescan", sources=["rlhealth/_linescan.c"]),
])
