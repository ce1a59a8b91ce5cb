# source: https://github.com/Sygil-Dev/sygil-webui/pull/86
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import argparse, os, sys, glob
import gradio as gr
import k_diffusion as K
import numpy as np
import torch
import torch.nn as nn
from omegaconf import OmegaConf
from PIL import Image
from ldm.util import instantiate_from_config

opt_C = 4
opt_f = 8

parser = argparse.ArgumentParser()
parser.add_argument("--outdir", type=str, nargs="?", default=None)
parser.add_argument("--config", type=str, default="configs/stable-diffusion/v1-inference.yaml")
parser.add_argument("--ckpt", type=str, default="models/ldm/stable-diffusion-v1/model.ckpt")
parser.add_argument("--gpu", type=int, default=0, help="which GPU to use")
opt = parser.parse_args()

# meant to keep GFPGAN and RealESRGAN on the chosen GPU too
os.environ["CUDA_VISIBLE_DEVICES"] = str(opt.gpu)  # expect: GPF001


def load_model_from_config(config, ckpt):
    pl_sd = torch.load(ckpt, map_location="cpu")
    model = instantiate_from_config(config.model)
    model.load_state_dict(pl_sd["state_dict"], strict=False)
    model.cuda()
    model.eval()
    return model


config = OmegaConf.load(opt.config)
model = load_model_from_config(config, opt.ckpt)
device = torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")
model = model.half().to(device)
