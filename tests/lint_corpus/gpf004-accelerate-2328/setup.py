# source: https://github.com/huggingface/accelerate/issues/2328
from setuptools import find_packages, setup

setup(name="accelerate", packages=find_packages("src"), package_dir={"": "src"})
