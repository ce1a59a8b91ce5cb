# source: https://github.com/modelscope/ms-swift/pull/41
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import os
from dataclasses import dataclass, field
from typing import Optional

import torch
import torch.distributed as dist
from utils import broadcast_string, get_dist_setting, get_model_tokenizer, is_dist, is_master

from swift import Seq2SeqTrainer, Seq2SeqTrainingArguments, get_logger
from swift.utils import add_version_to_work_dir, parse_args, seed_everything

logger = get_logger()


@dataclass
class SftArguments:
    model_type: str = "qwen-7b-chat"
    output_dir: str = "runs"
    ddp_backend: Optional[str] = field(
        default=None, metadata={"choices": ["nccl", "gloo", "mpi", "ccl"]}
    )
    seed: int = 42
    batch_size: int = 1

    def __post_init__(self):
        if is_dist():
            rank = get_dist_setting()[0]
            self.seed += rank  # a different dropout on every rank
            if self.ddp_backend is None:
                self.ddp_backend = "nccl"
            # set up the group early
            dist.init_process_group(backend=self.ddp_backend)  # expect: GPF006
        self.output_dir = os.path.join(self.output_dir, self.model_type)


def llm_sft(args: SftArguments) -> None:
    print(f"device_count: {torch.cuda.device_count()}")
    rank, local_rank, world_size, _ = get_dist_setting()
    seed_everything(args.seed)

    kwargs = {"low_cpu_mem_usage": True}
    kwargs["device_map"] = {"": local_rank} if is_dist() else "auto"
    model, tokenizer = get_model_tokenizer(args.model_type, torch_dtype=torch.bfloat16, **kwargs)

    output_dir = None
    if is_master():
        output_dir = add_version_to_work_dir(args.output_dir)
    if is_dist():
        # every rank must write to the same directory
        output_dir = broadcast_string(output_dir)
    trainer_args = Seq2SeqTrainingArguments(
        output_dir=output_dir,
        per_device_train_batch_size=args.batch_size,
        ddp_backend=args.ddp_backend,
        local_rank=local_rank,
    )
    trainer = Seq2SeqTrainer(model=model, args=trainer_args, tokenizer=tokenizer)
    trainer.train()


if __name__ == "__main__":
    args, remaining_argv = parse_args(SftArguments)
    llm_sft(args)
