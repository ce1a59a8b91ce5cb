# source: https://github.com/walkerning/aw_nas/pull/17
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import torch


class DataParallel(torch.nn.DataParallel):
    """The project's own DataParallel (the report's 'DataParallel(two GPUs)')."""
