# source: https://github.com/GuyTevet/motion-diffusion-model/pull/81
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import numpy as np
import torch


class GaussianDiffusion:
    def __init__(self, *, betas, lambda_rcxyz=0.0, lambda_vel=0.0, lambda_fc=0.0, data_rep="rot6d"):
        self.betas = np.array(betas, dtype=np.float64)
        self.num_timesteps = int(self.betas.shape[0])
        self.lambda_rcxyz = lambda_rcxyz
        self.lambda_vel = lambda_vel
        self.lambda_fc = lambda_fc
        self.data_rep = data_rep

    def masked_l2(self, a, b, mask):
        loss = ((a - b) ** 2 * mask).sum(dim=(1, 2, 3))
        return loss / mask.sum(dim=(1, 2, 3)).clamp(min=1)

    def training_losses(self, model, x_start, t, model_kwargs=None, noise=None, dataset=None):
        mask = model_kwargs["y"]["mask"]
        if noise is None:
            noise = torch.randn_like(x_start)
        x_t = self.q_sample(x_start, t, noise=noise)
        terms = {}
        model_output = model(x_t, t, **model_kwargs)
        target = x_start
        terms["rot_mse"] = self.masked_l2(target, model_output, mask)

        if self.lambda_fc > 0.0:
            torch.autograd.set_detect_anomaly(True)  # expect: GPF009
            target_xyz = model.rot2xyz(target)
            model_output_xyz = model.rot2xyz(model_output)
            pred_vel = model_output_xyz[..., 1:] - model_output_xyz[..., :-1]
            terms["fc"] = self.masked_l2(pred_vel, torch.zeros_like(pred_vel), mask[..., 1:])

        terms["loss"] = terms["rot_mse"] + self.lambda_fc * terms.get("fc", 0.0)
        return terms
