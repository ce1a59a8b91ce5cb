# source: https://github.com/huggingface/accelerate/issues/2328
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import argparse
import logging

from accelerate.utils import check_cuda_p2p_ib_support, patch_environment, prepare_multi_gpu_env

logger = logging.getLogger(__name__)


def multi_gpu_launcher(args):
    import torch.distributed.run as distrib_run

    current_env = prepare_multi_gpu_env(args)
    if not check_cuda_p2p_ib_support():
        warn = False
        if "NCCL_P2P_DISABLE" not in current_env:
            current_env["NCCL_P2P_DISABLE"] = "1"  # expect: GPF004
            warn = True
        if "NCCL_IB_DISABLE" not in current_env:
            current_env["NCCL_IB_DISABLE"] = "1"
            warn = True
        if warn:
            logger.warning("RTX 3090 or 4000 series: disabling P2P and IB communication.")
    with patch_environment(**current_env):
        distrib_run.run(args)


def launch_command(args):
    if args.multi_gpu:
        multi_gpu_launcher(args)


def main():
    parser = argparse.ArgumentParser("accelerate launch")
    parser.add_argument("--multi_gpu", action="store_true")
    parser.add_argument("--num_processes", type=int, default=2)
    parser.add_argument("--mixed_precision", default="no")
    parser.add_argument("training_script")
    parser.add_argument("training_script_args", nargs=argparse.REMAINDER)
    launch_command(parser.parse_args())


if __name__ == "__main__":
    main()
