# source: https://github.com/meta-pytorch/torchcomms/pull/1421
import os


def setup_env():
    os.environ["NCCL_DEBUG"] = "INFO"  # expect: GPF003
    os.environ.setdefault("NCCL_ASYNC_ERROR_HANDLING", "1")


setup_env()
