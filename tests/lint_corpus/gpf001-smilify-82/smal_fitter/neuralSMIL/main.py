# source: https://github.com/FabianPlum/SMILify/pull/82
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import torch
import os

from smal_fitter.neuralSMIL.smil_datasets import replicAntSMILDataset
from smal_fitter.neuralSMIL.smil_image_regressor import SMILImageRegressor
import config


def placeholder_batch(batch_size=1, image_size=512):
    return torch.zeros((batch_size, 3, image_size, image_size))


def demonstrate_smil_regressor():
    device = "cuda" if torch.cuda.is_available() else "cpu"
    net = SMILImageRegressor(
        device=device,
        data_batch=placeholder_batch(),
        batch_size=1,
        shape_family=config.SHAPE_FAMILY,
        rgb_only=True,
    ).to(device)
    samples = replicAntSMILDataset("data/replicAnt_trials/replicAnt-x-SMIL-TEX")
    if len(samples) > 0:
        x_data, _ = samples[0]
        net.eval()
        with torch.no_grad():
            params = net.predict_from_image(x_data["input_image_data"])
        print(sorted(params))


if __name__ == "__main__":
    # pick the GPU to use (the first one unless config says otherwise)
    os.environ["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"  # expect: GPF001
    os.environ["CUDA_VISIBLE_DEVICES"] = config.GPU_IDS  # expect: GPF001

    device = "cuda" if torch.cuda.is_available() else "cpu"
    demonstrate_smil_regressor()
