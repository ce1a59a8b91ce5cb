"""What runs where training runs: lint, preflight and the pytest plugin."""
