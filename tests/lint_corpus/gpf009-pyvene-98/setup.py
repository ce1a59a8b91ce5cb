# source: https://github.com/stanfordnlp/pyvene/pull/98
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
from setuptools import find_packages, setup

setup(name="pyvene", packages=find_packages())
