# source: https://github.com/KaiyangZhou/deep-person-reid/issues/297
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import os

import torchreid

os.environ["CUDA_VISIBLE_DEVICES"] = "3,4"  # expect: GPF001

datamanager = torchreid.data.ImageDataManager(
    root="reid-data", sources="market1501", height=256, width=128, batch_size_train=32
)
model = torchreid.models.build_model(
    name="resnet50", num_classes=datamanager.num_train_pids, loss="softmax", pretrained=True
)
model = model.cuda()
optimizer = torchreid.optim.build_optimizer(model, optim="adam", lr=0.0003)
engine = torchreid.engine.ImageSoftmaxEngine(datamanager, model, optimizer=optimizer)
engine.run(save_dir="log/resnet50", max_epoch=60, eval_freq=10)
