# source: https://github.com/awslabs/graphstorm/issues/344
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import graphstorm as gs
from graphstorm.config import GSConfig, get_argument_parser
from graphstorm.dataloading import GSgnnNodeDataLoader, GSgnnNodeTrainData
from graphstorm.trainer import GSgnnNodePredictionTrainer
from graphstorm.utils import setup_device


def main(config_args):
    config = GSConfig(config_args)
    gs.initialize(ip_config=config.ip_config, backend=config.backend)
    device = setup_device(config.local_rank)
    train_data = GSgnnNodeTrainData(config.graph_name, config.part_config)
    model = gs.create_builtin_node_gnn_model(train_data.g, config, train_task=True)
    trainer = GSgnnNodePredictionTrainer(model, gs.get_rank(), model.create_optimizer())
    if config.restore_model_path is not None:
        trainer.restore_model(
            model_path=config.restore_model_path,
            model_layer_to_load=config.restore_model_layers,
        )
    trainer.setup_device(device=device)
    loader = GSgnnNodeDataLoader(train_data, train_data.train_idxs, device=device)
    trainer.fit(train_loader=loader, num_epochs=config.num_epochs)


if __name__ == "__main__":
    parser = get_argument_parser()
    main(parser.parse_args())
