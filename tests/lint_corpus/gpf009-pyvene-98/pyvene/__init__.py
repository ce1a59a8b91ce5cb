# source: https://github.com/stanfordnlp/pyvene/pull/98
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
from .models.intervenable_base import IntervenableModel
