# source: https://github.com/huggingface/accelerate/issues/2328
