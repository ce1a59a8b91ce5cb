# source: https://github.com/meta-pytorch/torchcomms/pull/1421
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import os


def setup_env():
    os.environ["NCCL_DEBUG"] = "INFO"  # expect: GPF003
    os.environ.setdefault("NCCL_ASYNC_ERROR_HANDLING", "1")


setup_env()
