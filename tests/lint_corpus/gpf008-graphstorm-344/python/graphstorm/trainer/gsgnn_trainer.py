# source: https://github.com/awslabs/graphstorm/issues/344
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
ALL_LAYERS = ["embed", "gnn", "decoder"]


class GSgnnNodePredictionTrainer:
    def __init__(self, model, rank, optimizer):
        self._model = model
        self.rank = rank
        self._optimizer = optimizer
        self._device = "cpu"

    def setup_device(self, device):
        self._device = device
        self._model = self._model.to(device)

    def restore_model(self, model_path, model_layer_to_load=None):
        """restore the GNN model and, for a full restore, the optimizer"""
        self._model.restore_model(model_path, model_layer_to_load)
        if model_layer_to_load == ALL_LAYERS:
            self._optimizer.load_opt_state(model_path, self._model.device)

    def fit(self, train_loader, num_epochs):
        for _ in range(num_epochs):
            for batch in train_loader:
                loss = self._model(batch)
                loss.backward()
