# source: https://github.com/Xingyu-Lin/mbpo_pytorch/issues/8
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import torch
import torch.nn.functional as F

torch.autograd.set_detect_anomaly(True)  # expect: GPF009


class SAC:
    def __init__(self, policy, critic, lr=3e-4):
        self.policy, self.critic = policy, critic
        self.critic_optim = torch.optim.Adam(critic.parameters(), lr=lr)

    def update_parameters(self, state, target):
        loss = F.mse_loss(self.critic(state), target)
        self.critic_optim.zero_grad()
        loss.backward()
        self.critic_optim.step()
