# source: https://github.com/huggingface/pytorch-image-models/issues/72
