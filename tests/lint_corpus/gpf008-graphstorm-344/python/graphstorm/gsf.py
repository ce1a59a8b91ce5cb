# source: https://github.com/awslabs/graphstorm/issues/344
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import dgl
import torch as th

from .utils import get_rank


def initialize(ip_config, backend):
    """start DistDGL and the torch process group"""
    dgl.distributed.initialize(ip_config, net_type="socket")
    assert th.cuda.is_available() or backend == "gloo", "a CPU run needs gloo"
    if ip_config is not None:
        th.distributed.init_process_group(backend=backend)
