# source: https://github.com/xusenlinzy/api-for-open-llm/pull/23
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import torch


class ModelServer:
    def __init__(
        self, model, tokenizer, device, model_name="chatglm", context_len=2048, stream_interval=2
    ):
        self.model = model
        self.tokenizer = tokenizer
        self.device = device
        self.model_name = model_name
        self.context_len = context_len
        self.stream_interval = stream_interval
