# source: https://github.com/pytorch/examples/issues/969
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import torch
import torch.distributed as dist


def main_worker(gpu, args):
    dist.init_process_group(backend="nccl", rank=gpu, world_size=args.world_size)
    torch.cuda.set_device(gpu)
    model = torch.nn.parallel.DistributedDataParallel(
        torch.nn.Linear(4, 4).cuda(gpu), device_ids=[gpu]
    )
    if args.pretrained:
        state = torch.load(args.pretrained)  # expect: GPF008
        model.module.load_state_dict(state)
    return model
