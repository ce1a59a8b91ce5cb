# source: https://github.com/modelscope/ms-swift/pull/41
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import os

import torch
from modelscope import AutoModelForCausalLM, AutoTokenizer, snapshot_download

from .utils import broadcast_string, is_dist, is_master

MODEL_MAPPING = {"qwen-7b-chat": {"model_id": "qwen/Qwen-7B-Chat", "revision": "v1.0.5"}}


def get_model_tokenizer_from_repo(model_dir, torch_dtype, **model_kwargs):
    tokenizer = AutoTokenizer.from_pretrained(model_dir, trust_remote_code=True)
    model = AutoModelForCausalLM.from_pretrained(
        model_dir, torch_dtype=torch_dtype, trust_remote_code=True, **model_kwargs
    )
    return model, tokenizer


def get_model_tokenizer(model_type: str, torch_dtype=None, **kwargs):
    entry = MODEL_MAPPING[model_type]
    if torch_dtype is None:
        torch_dtype = torch.float16
    model_dir = None
    if is_master():
        model_dir = entry["model_id"]
        if not os.path.exists(model_dir):
            model_dir = snapshot_download(model_dir, entry["revision"])
    if is_dist():
        # the other ranks learn the download directory from rank 0
        model_dir = broadcast_string(model_dir)
    return get_model_tokenizer_from_repo(model_dir, torch_dtype, **kwargs)
