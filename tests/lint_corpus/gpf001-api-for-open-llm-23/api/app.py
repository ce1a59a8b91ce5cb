# source: https://github.com/xusenlinzy/api-for-open-llm/pull/23
# ruff: noqa - a reconstruction of a reported mistake, kept as reported
import argparse
import json
import os
import sys

sys.path.insert(0, ".")

import uvicorn
from fastapi import FastAPI
from fastapi.middleware.cors import CORSMiddleware
from loguru import logger
from sentence_transformers import SentenceTransformer

from api.generate import ModelServer
from api.models import load_model

app = FastAPI()

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="OpenAI Compatible RESTful API server.")
    parser.add_argument("--host", type=str, default="0.0.0.0")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--model_name", type=str, default="chatglm")
    parser.add_argument("--model_path", "-m", type=str, default=None)
    parser.add_argument("--device", type=str, choices=["cpu", "cuda"], default="cuda")
    parser.add_argument(
        "--gpus", type=str, default=None, help="A single GPU like 1 or multiple GPUs like 0,2"
    )
    parser.add_argument("--num_gpus", type=int, default=1)
    parser.add_argument("--embedding_name", type=str, default=None)
    args = parser.parse_args()

    sys.path.insert(0, args.model_path)

    if args.gpus:
        if len(args.gpus.split(",")) < args.num_gpus:
            raise ValueError(f"Larger --num_gpus ({args.num_gpus}) than --gpus {args.gpus}!")
        os.environ["CUDA_VISIBLE_DEVICES"] = args.gpus  # expect: GPF001

    app.add_middleware(CORSMiddleware, allow_origins=["*"])
    logger.info(f"args: {args}")

    model, tokenizer = load_model(
        args.model_name,
        model_name_or_path=args.model_path,
        device=args.device,
        num_gpus=args.num_gpus,
    )
    model_server = ModelServer(model, tokenizer, args.device, model_name=args.model_name)

    embed_client = None
    if args.embedding_name:
        embed_client = SentenceTransformer(args.embedding_name, device=args.device)

    uvicorn.run(app, host=args.host, port=args.port, log_level="info")
