# source: https://github.com/Project-MONAI/MONAI/issues/2167
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
from . import config
