# source: https://github.com/huggingface/accelerate/pull/1156
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
from setuptools import find_packages, setup

setup(
    name="accelerate",
    version="0.17.0.dev0",
    package_dir={"": "src"},
    packages=find_packages("src"),
    install_requires=["torch>=1.4.0"],
)
