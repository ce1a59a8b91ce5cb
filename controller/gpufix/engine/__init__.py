"""The decision engine: knowledge base, findings, the decision and the plan. No I/O in decide."""
