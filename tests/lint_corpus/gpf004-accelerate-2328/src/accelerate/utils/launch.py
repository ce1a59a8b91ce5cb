# source: https://github.com/huggingface/accelerate/issues/2328
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import contextlib
import os


def prepare_multi_gpu_env(args):
    setattr(args, "nproc_per_node", str(args.num_processes))
    current_env = os.environ.copy()
    current_env["ACCELERATE_MIXED_PRECISION"] = str(args.mixed_precision)
    return current_env


@contextlib.contextmanager
def patch_environment(**kwargs):
    old = {key: os.environ.get(key) for key in kwargs}
    os.environ.update({key: str(value) for key, value in kwargs.items()})
    try:
        yield
    finally:
        for key, value in old.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
