# source: https://github.com/huggingface/accelerate/pull/299
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import logging
import os
import random

import numpy as np
import torch

MODEL_NAME = "pytorch_model"
OPTIMIZER_NAME = "optimizer"
SCALER_NAME = "scaler.pt"
RNG_STATE_NAME = "random_states"

logger = logging.getLogger(__name__)


def load_accelerator_state(input_dir, models, optimizers, process_index, scaler=None):
    # Model states
    for i, model in enumerate(models):
        weights_name = f"{MODEL_NAME}.bin" if i == 0 else f"{MODEL_NAME}_{i}.bin"
        input_model_file = os.path.join(input_dir, weights_name)
        models[i].load_state_dict(torch.load(input_model_file))  # expect: GPF008
    logger.info("All model weights loaded successfully")

    # Optimizer states
    for i, opt in enumerate(optimizers):
        optimizer_name = f"{OPTIMIZER_NAME}.bin" if i == 0 else f"{OPTIMIZER_NAME}_{i}.bin"
        input_optimizer_file = os.path.join(input_dir, optimizer_name)
        optimizers[i].load_state_dict(torch.load(input_optimizer_file))  # expect: GPF008
    logger.info("All optimizer states loaded successfully")

    # GradScaler state
    if scaler is not None:
        input_scaler_file = os.path.join(input_dir, SCALER_NAME)
        scaler.load_state_dict(torch.load(input_scaler_file))
        logger.info("GradScaler state loaded successfully")

    # Random states
    states = torch.load(os.path.join(input_dir, f"{RNG_STATE_NAME}_{process_index}.pkl"))
    random.setstate(states["random_state"])
    np.random.set_state(states["numpy_random_seed"])
    torch.set_rng_state(states["torch_manual_seed"])
    torch.cuda.set_rng_state_all(states["torch_cuda_manual_seed"])
    logger.info("All random states loaded successfully")
