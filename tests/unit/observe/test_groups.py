"""Consumer-group commits: which failures are normal events (INFO) and which are not."""

import pytest
from confluent_kafka import KafkaError, KafkaException

from frazil.observe.groups import transient


def test_a_coordinator_loading_or_moving_is_transient() -> None:
    loading = KafkaError(KafkaError.COORDINATOR_LOAD_IN_PROGRESS)
    assert transient(KafkaException(loading))
    # As commit_group_offsets raises a partition's error.
    assert transient(RuntimeError(f"payments/0: {loading}"))
    assert transient(KafkaException(KafkaError(KafkaError.NOT_COORDINATOR)))
    # The coordinator's broker killed: another one takes the group over.
    assert transient(KafkaException(KafkaError(KafkaError._TRANSPORT)))


def test_a_refusal_an_operator_must_fix_is_not() -> None:
    assert not transient(KafkaException(KafkaError(KafkaError.GROUP_AUTHORIZATION_FAILED)))
    assert not transient(RuntimeError("payments/0: UNKNOWN_MEMBER_ID"))


def test_offsets_a_loading_coordinator_refused_are_tried_again_even_when_stopping(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A run of one batch: its only offsets meet a coordinator still loading, then the run
    # stops. They must still reach the group (the broker answers, the admin call is faked).
    from frazil.observe import groups

    tries: list[dict[str, dict[int, int]]] = []

    def commit(admin: object, group: str, offsets: dict[str, dict[int, int]]) -> None:
        tries.append(offsets)
        if len(tries) < 3:
            raise KafkaException(KafkaError(KafkaError.COORDINATOR_LOAD_IN_PROGRESS))

    monkeypatch.setattr(groups, "commit_group_offsets", commit)
    monkeypatch.setattr(groups, "RETRY_S", 0.01)
    committer = groups.GroupCommitter({"bootstrap.servers": "127.0.0.1:1"})
    committer.start()
    committer.submit("frazil-p", {"payments": {0: 42}})
    committer.close()
    assert not committer.is_alive()
    assert committer.committed == {"frazil-p": {"payments": {0: 42}}}
    assert len(tries) == 3


def test_offsets_a_refusing_broker_will_not_take_are_dropped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from frazil.observe import groups

    tries: list[str] = []

    def commit(admin: object, group: str, offsets: dict[str, dict[int, int]]) -> None:
        tries.append(group)
        raise KafkaException(KafkaError(KafkaError.GROUP_AUTHORIZATION_FAILED))

    monkeypatch.setattr(groups, "commit_group_offsets", commit)
    committer = groups.GroupCommitter({"bootstrap.servers": "127.0.0.1:1"})
    committer.start()
    committer.submit("frazil-p", {"payments": {0: 42}})
    committer.close()
    assert not committer.is_alive()
    assert committer.committed == {} and tries == ["frazil-p"]
