"""Apply a plan: host checks, batches, reboots, the probe, rollback and the journal."""
