"""The one build step pyproject.toml cannot declare: the C-API compatibility extension.

All project metadata lives in pyproject.toml; this file only adds ``rlhealth._pyeval_compat``
(see rlhealth/_pyeval_compat.c and rlhealth/durable_loader.py), built by a plain ``pip install .``.
"""
from setuptools import Extension, setup

setup(ext_modules=[Extension("rlhealth._pyeval_compat", sources=["rlhealth/_pyeval_compat.c"])])
