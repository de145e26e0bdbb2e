"""The build steps pyproject.toml cannot declare: rlhealth's C extensions.

All project metadata lives in pyproject.toml; this file only adds ``rlhealth._pyeval_compat``
(see rlhealth/_pyeval_compat.c and rlhealth/durable_loader.py), ``rlhealth.probes._linescan``
(the per-match work of the log scan, probes/_linescan.c, used by probes/scan.py),
``rlhealth.probes.parse._fileread`` (a trial's file reads, probes/parse/_fileread.c, used by
probes/parse/trials.py) and ``rlhealth.probes.parse._timestamps`` (log-line and ISO-8601
timestamps, probes/parse/_timestamps.c, used by probes/parse/timestamps.py), built by a plain
``pip install .`` (durable-rules needs a C compiler anyway). The last three have pure-Python
equivalents used when they cannot be imported.
"""
from setuptools import Extension, setup

setup(ext_modules=[
    Extension("rlhealth._pyeval_compat", sources=["rlhealth/_pyeval_compat.c"]),
    Extension("rlhealth.probes._linescan", sources=["probes/_linescan.c"]),
    Extension("rlhealth.probes.parse._fileread", sources=["probes/parse/_fileread.c"]),
    Extension("rlhealth.probes.parse._timestamps", sources=["probes/parse/_timestamps.c"]),
])
