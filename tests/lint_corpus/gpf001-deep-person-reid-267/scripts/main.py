# source: https://github.com/KaiyangZhou/deep-person-reid/issues/267
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import os
import sys
import time
import os.path as osp
import argparse
import torch
import torch.nn as nn

import torchreid
from torchreid.utils import Logger, set_random_seed, load_pretrained_weights, check_isfile

from default_config import get_default_config, imagedata_kwargs, optimizer_kwargs, engine_run_kwargs


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--config-file", type=str, default="")
    parser.add_argument("--root", type=str, default="")
    parser.add_argument("--gpu-devices", type=str, default="")
    args = parser.parse_args()

    cfg = get_default_config()
    cfg.use_gpu = torch.cuda.is_available()
    if args.config_file:
        cfg.merge_from_file(args.config_file)
    set_random_seed(cfg.train.seed)

    if cfg.use_gpu and args.gpu_devices:
        # without --gpu-devices every GPU is used
        os.environ["CUDA_VISIBLE_DEVICES"] = args.gpu_devices  # expect: GPF001
    log_name = "train.log" + time.strftime("-%Y-%m-%d-%H-%M-%S")
    sys.stdout = Logger(osp.join(cfg.data.save_dir, log_name))

    datamanager = torchreid.data.ImageDataManager(**imagedata_kwargs(cfg))
    model = torchreid.models.build_model(
        name=cfg.model.name,
        num_classes=datamanager.num_train_pids,
        loss=cfg.loss.name,
        use_gpu=cfg.use_gpu,
    )
    if cfg.model.load_weights and check_isfile(cfg.model.load_weights):
        load_pretrained_weights(model, cfg.model.load_weights)
    if cfg.use_gpu:
        model = nn.DataParallel(model).cuda()

    optimizer = torchreid.optim.build_optimizer(model, **optimizer_kwargs(cfg))
    engine = torchreid.engine.ImageSoftmaxEngine(
        datamanager, model, optimizer=optimizer, use_gpu=cfg.use_gpu
    )
    engine.run(**engine_run_kwargs(cfg))


if __name__ == "__main__":
    main()
