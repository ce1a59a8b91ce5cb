# source: https://github.com/huggingface/accelerate/issues/2328
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
from .environment import check_cuda_p2p_ib_support
from .launch import patch_environment, prepare_multi_gpu_env
