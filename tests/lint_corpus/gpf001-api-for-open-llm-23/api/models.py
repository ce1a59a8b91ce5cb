# source: https://github.com/xusenlinzy/api-for-open-llm/pull/23
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import torch
from transformers import AutoModel, AutoTokenizer


def load_model(model_name, model_name_or_path=None, device="cuda", num_gpus=1, **kwargs):
    tokenizer = AutoTokenizer.from_pretrained(model_name_or_path, trust_remote_code=True)
    model = AutoModel.from_pretrained(model_name_or_path, trust_remote_code=True)
    if device == "cuda" and num_gpus == 1:
        model.to(device)
    return model.eval(), tokenizer
