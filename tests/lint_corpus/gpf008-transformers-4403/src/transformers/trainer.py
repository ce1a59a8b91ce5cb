# source: https://github.com/huggingface/transformers/pull/4403
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import logging
import os
from typing import Optional

import torch
from torch.utils.data import DataLoader

logger = logging.getLogger(__name__)

PREFIX_CHECKPOINT_DIR = "checkpoint"


class Trainer:
    def __init__(self, model, args, data_collator=None, train_dataset=None):
        self.model = model
        self.args = args
        self.data_collator = data_collator
        self.train_dataset = train_dataset

    def get_train_dataloader(self) -> DataLoader:
        return DataLoader(
            self.train_dataset,
            batch_size=self.args.train_batch_size,
            collate_fn=self.data_collator,
        )

    def get_optimizers(self, num_training_steps):
        optimizer = torch.optim.AdamW(self.model.parameters(), lr=self.args.learning_rate)
        scheduler = torch.optim.lr_scheduler.LambdaLR(
            optimizer, lambda step: max(0.0, 1.0 - step / num_training_steps)
        )
        return optimizer, scheduler

    def train(self, model_path: Optional[str] = None):
        train_dataloader = self.get_train_dataloader()
        t_total = len(train_dataloader) * int(self.args.num_train_epochs)
        optimizer, scheduler = self.get_optimizers(num_training_steps=t_total)

        # resume the optimizer and scheduler if their states were saved
        if (
            model_path is not None
            and os.path.isfile(os.path.join(model_path, "optimizer.pt"))
            and os.path.isfile(os.path.join(model_path, "scheduler.pt"))
        ):
            optimizer.load_state_dict(
                torch.load(os.path.join(model_path, "optimizer.pt"))  # expect: GPF008
            )
            scheduler.load_state_dict(torch.load(os.path.join(model_path, "scheduler.pt")))

        model = self.model
        model.to(self.args.device)
        if self.args.n_gpu > 1:
            model = torch.nn.DataParallel(model)
        if self.args.local_rank != -1:
            model = torch.nn.parallel.DistributedDataParallel(
                model,
                device_ids=[self.args.local_rank],
                output_device=self.args.local_rank,
                find_unused_parameters=True,
            )

        global_step = 0
        model.zero_grad()
        for _ in range(int(self.args.num_train_epochs)):
            for inputs in train_dataloader:
                model.train()
                inputs = {k: v.to(self.args.device) for k, v in inputs.items()}
                loss = model(**inputs)[0]
                if self.args.n_gpu > 1:
                    loss = loss.mean()
                loss.backward()
                optimizer.step()
                scheduler.step()
                model.zero_grad()
                global_step += 1

                if self.args.local_rank in [-1, 0] and global_step % self.args.save_steps == 0:
                    output_dir = os.path.join(
                        self.args.output_dir, f"{PREFIX_CHECKPOINT_DIR}-{global_step}"
                    )
                    os.makedirs(output_dir, exist_ok=True)
                    torch.save(optimizer.state_dict(), os.path.join(output_dir, "optimizer.pt"))
                    torch.save(scheduler.state_dict(), os.path.join(output_dir, "scheduler.pt"))
        return global_step
