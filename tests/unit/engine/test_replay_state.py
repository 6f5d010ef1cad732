"""When a dead-letter replay's claim is stale, so that a later replay may take it over."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

from frazil.engine import replay_state
from frazil.engine.replay_state import Claim, ReplayState


def _now() -> int:
    return int(time.time() * 1000)


def test_a_claim_of_a_live_replay_of_this_process_is_held() -> None:
    claim = Claim("abc", socket.gethostname(), os.getpid(), _now())
    replay_state._HELD.add("abc")
    try:
        assert not claim.stale(_now())
    finally:
        replay_state._HELD.discard("abc")
    # The same process, but no replay of it holds that id any more (it ended by an error).
    assert claim.stale(_now())


def test_a_claim_of_a_dead_process_on_this_host_is_stale_at_once() -> None:
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    claim = Claim("abc", socket.gethostname(), int(gone.stdout), _now())
    assert claim.stale(_now())


def test_a_claim_from_another_host_is_stale_only_once_not_renewed() -> None:
    renewed = _now()
    claim = Claim("abc", "elsewhere", 1, renewed)
    assert not claim.stale(renewed + int(replay_state.STALE_S * 1000) - 1)
    assert claim.stale(renewed + int(replay_state.STALE_S * 1000) + 1)


def test_an_unreadable_claim_is_stale() -> None:
    claim = replay_state._claim_of("{not json")
    assert claim is not None and claim.stale(_now())
    assert replay_state._claim_of(None) is None


def test_the_state_reads_back() -> None:
    state = ReplayState("1|||f", {"table db.t": {"before": 3, "done": True}}, legacy=True)
    assert ReplayState.from_json(state.to_json()) == state
