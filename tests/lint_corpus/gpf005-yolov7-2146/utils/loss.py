# source: https://github.com/WongKinYiu/yolov7/pull/2146
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import torch


class ComputeLossOTA:
    def __init__(self, model):
        self.model = model

    def __call__(self, p, targets, imgs):
        indices = self.build_targets(p, targets, imgs)
        return sum(pi[idx].sum() for pi, idx in zip(p, indices))

    def build_targets(self, p, targets, imgs):
        indices = []
        for pi in p:
            idx = torch.arange(pi.shape[0], device="cuda:0")  # expect: GPF005
            indices.append(idx)
        return indices
