# source: https://github.com/awslabs/graphstorm/issues/344
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
from .gnn import GSOptimizer
