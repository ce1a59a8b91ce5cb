# source: https://github.com/hkchengrex/MMAudio/pull/57
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import os
from argparse import ArgumentParser

import torch
import torch.distributed as distributed
from open_clip import create_model_from_pretrained
from torch.utils.data import DataLoader

from mmaudio.data.extraction.wav_dataset import WavTextClipsDataset
from mmaudio.ext.autoencoder import AutoEncoderModule

local_rank = int(os.environ["LOCAL_RANK"])
world_size = int(os.environ["WORLD_SIZE"])


def distributed_setup():
    distributed.init_process_group(backend="nccl")  # expect: GPF006
    local_rank = distributed.get_rank()
    world_size = distributed.get_world_size()
    print(f"Initialized: local_rank={local_rank}, world_size={world_size}")
    return local_rank, world_size


@torch.inference_mode()
def main():
    distributed_setup()

    parser = ArgumentParser()
    parser.add_argument("--data_dir", type=str)
    args = parser.parse_args()

    clip_model = (
        create_model_from_pretrained("hf-hub:apple/DFN5B-CLIP-ViT-H-14-384", return_transform=False)
        .eval()
        .cuda()
    )
    tod = AutoEncoderModule(vae_ckpt_path="./ext_weights/v1-16.pth", mode="16k").eval().cuda()

    dataset = WavTextClipsDataset(args.data_dir)
    loader = DataLoader(dataset, batch_size=16)
    for i, batch in enumerate(loader):
        waveforms = batch["waveform"].cuda()
        tokens = batch["tokens"].cuda()
        data = {"mean": tod.encode(waveforms).mean, "text": clip_model.encode_text(tokens)}
        torch.save(data, f"r{local_rank}_{i:05d}.pth")

    distributed.barrier()


if __name__ == "__main__":
    main()
    distributed.destroy_process_group()
