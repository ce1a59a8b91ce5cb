# source: https://github.com/pytorch-tpu/llama/pull/21
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import json
import os
from pathlib import Path

import torch

from llama import LLaMA, ModelArgs, Tokenizer, Transformer

USE_CUDA = os.environ.get("USE_CUDA", False)


def load(
    ckpt_dir: str,
    tokenizer_path: str,
    rank: int,
    world_size: int,
    max_seq_len: int,
    max_batch_size: int,
    device: torch.device,
) -> LLaMA:
    if ckpt_dir:
        checkpoints = sorted(Path(ckpt_dir).glob("*.pth"))
        checkpoint = torch.load(checkpoints[rank], map_location="cpu")
        with open(Path(ckpt_dir) / "params.json", "r") as f:
            params = json.loads(f.read())
    else:
        params = {"dim": 4096, "n_layers": 32, "n_heads": 32}

    model_args = ModelArgs(max_seq_len=max_seq_len, max_batch_size=max_batch_size, **params)
    tokenizer = Tokenizer(model_path=tokenizer_path)
    model_args.vocab_size = tokenizer.n_words
    if USE_CUDA:
        torch.set_default_tensor_type(torch.cuda.HalfTensor)
    else:
        torch.set_default_tensor_type(torch.BFloat16Tensor)
    model = Transformer(model_args)
    if ckpt_dir:
        model.load_state_dict(checkpoint, strict=False)
    model = model.to(device)
    torch.set_default_tensor_type(torch.FloatTensor)
    return LLaMA(model, tokenizer)
