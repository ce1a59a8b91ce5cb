# source: https://github.com/awslabs/graphstorm/issues/344
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import torch as th


def setup_device(local_rank):
    if th.cuda.is_available():
        device = "cuda:%d" % local_rank
        th.cuda.set_device(device)
    else:
        device = "cpu"
    return device


def get_rank():
    if th.distributed.is_initialized():
        return th.distributed.get_rank()
    return 0
