# source: https://github.com/lllyasviel/ControlNet/issues/351
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import pytorch_lightning as pl
from torch.utils.data import DataLoader

from cldm.logger import ImageLogger
from cldm.model import create_model, load_state_dict
from tutorial_dataset import MyDataset

resume_path = "./models/control_sd21_ini.ckpt"
batch_size = 4

model = create_model("./models/cldm_v21.yaml").cpu()
model.load_state_dict(load_state_dict(resume_path, location="cpu"))
model.learning_rate = 1e-5

dataloader = DataLoader(MyDataset(), num_workers=0, batch_size=batch_size, shuffle=True)
logger = ImageLogger(batch_frequency=300)
trainer = pl.Trainer(gpus=4, accelerator="dp", precision=32, callbacks=[logger])  # expect: GPF011

trainer.fit(model, dataloader)
