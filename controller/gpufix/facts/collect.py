"""Facts for a host pattern: recorded snapshots where the inventory says so, live gathering otherwise."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path

from gpufix import runner
from gpufix.errors import GpufixError, InvalidInput, Unreachable
from gpufix.facts.snapshot import Snapshot, from_module_result, load_snapshot
from gpufix.inventory import resolve


@dataclass(frozen=True)
class Gathered:
    host: str
    snapshot: Snapshot | None
    error: str = ""
    unreachable: bool = False


def gather(
    pattern: str,
    inventory: Path,
    *,
    python_envs: list[str] | None = None,
    progress: runner.Progress | None = None,
    forks: int = runner.FORKS,
    timeout: int = runner.FACTS_TIMEOUT_S,
) -> list[Gathered]:
    """Facts for every host `pattern` matches, in inventory order. `forks` and `timeout` (the
    whole live gathering run, all hosts together) go to Ansible as they are."""
    targets = resolve(pattern, inventory)
    out: dict[str, Gathered] = {}
    live = []
    for t in targets:
        if t.snapshot is not None:
            try:  # the inventory is wrong: the whole run stops, naming the host
                snap = load_snapshot(t.snapshot)
            except InvalidInput as exc:
                raise InvalidInput(f"{t.name}: {exc}") from None
            # The inventory's name is the one the user typed; the snapshot keeps where it came from.
            out[t.name] = Gathered(t.name, replace(snap, host=t.name))
        else:
            live.append(t.name)
    if live:
        res = runner.gather_facts(
            ",".join(live) if pattern not in live or len(live) > 1 else pattern,
            inventory,
            python_envs=python_envs,
            progress=progress,
            forks=forks,
            timeout=timeout,
        )
        now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        for name in live:
            hr = res.hosts.get(name)
            if res.status == "timeout" and (hr is None or (hr.facts is None and hr.cut_off)):
                why = f"no facts within the {timeout} s gathering limit (raise it with --timeout)"
                out[name] = Gathered(name, None, why, True)
            elif hr is None:
                out[name] = Gathered(name, None, f"no result from ansible ({res.status})", True)
            elif hr.status == "unreachable":
                out[name] = Gathered(name, None, f"unreachable: {hr.message}", True)
            elif hr.facts is None:
                msg = hr.message or "the facts module returned nothing"
                if runner.python_unmanageable(msg):
                    # the interpreter named for the host did not run, or is too old to drive
                    msg = (
                        "target Python did not run or cannot be managed by ansible-core 2.16 "
                        f"(needs 2.7 or 3.6+): {msg}"
                    )
                out[name] = Gathered(name, None, msg, runner.python_unmanageable(msg))
            else:
                try:  # a host's report is data from outside: validated like a file
                    snap = from_module_result(name, {"gpufix": hr.facts})
                except InvalidInput as exc:
                    out[name] = Gathered(name, None, f"facts refused: {exc}", False)
                else:
                    out[name] = Gathered(name, replace(snap, gathered_at=now))
    return [out[t.name] for t in targets]


def one(pattern: str, inventory: Path, **kw: object) -> Snapshot:
    """Facts for exactly one host, or a one-line error."""
    got = gather(pattern, inventory, **kw)  # type: ignore[arg-type]
    if len(got) != 1:
        raise InvalidInput(f"{pattern!r} matches {len(got)} hosts; name one host")
    g = got[0]
    if g.snapshot is None:
        raise (Unreachable if g.unreachable else GpufixError)(f"{g.host}: {g.error}")
    return g.snapshot
