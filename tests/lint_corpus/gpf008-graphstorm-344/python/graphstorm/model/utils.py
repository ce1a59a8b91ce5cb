# source: https://github.com/awslabs/graphstorm/issues/344
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import os

import torch as th


def save_opt_state(model_path, dense_opts, lm_opts, sparse_opts):
    """save every optimizer's state into one file beside the model"""
    opt_states = {}
    if len(dense_opts) == 1:
        opt_states["dense"] = dense_opts[0].state_dict()
    if len(lm_opts) == 1:
        opt_states["lm"] = lm_opts[0].state_dict()
    th.save(opt_states, os.path.join(model_path, "optimizers.bin"))


def load_opt_state(model_path, dense_opts, lm_opts, sparse_opts):
    """read the optimizer states back and restore the optimizers"""
    checkpoint = th.load(os.path.join(model_path, "optimizers.bin"))  # expect: GPF008

    assert len(dense_opts) <= 1, "only one dense optimizer is supported"
    assert len(lm_opts) <= 1, "only one language-model optimizer is supported"
    if "dense" in checkpoint:
        dense_opts[0].load_state_dict(checkpoint["dense"])
    if "lm" in checkpoint:
        lm_opts[0].load_state_dict(checkpoint["lm"])
    if "sparse" in checkpoint and len(sparse_opts) > 0:
        raise NotImplementedError("sparse optimizer states cannot be loaded")
