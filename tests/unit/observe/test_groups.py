"""Consumer-group commits: which failures are normal events (INFO) and which are not."""

import pytest
from confluent_kafka import KafkaError, KafkaException

from frazil.observe.groups import transient


def test_a_coordinator_loading_or_moving_is_transient() -> None:
    loading = KafkaError(KafkaError.COORDINATOR_LOAD_IN_PROGRESS)
    assert transient(KafkaException(loading))
    # As a partition's error is raised.
    assert transient(RuntimeError(f"payments/0: {loading}"))
    assert transient(KafkaException(KafkaError(KafkaError.NOT_COORDINATOR)))
    # The coordinator's broker killed: another one takes the group over.
    assert transient(KafkaException(KafkaError(KafkaError._TRANSPORT)))


def test_a_refusal_an_operator_must_fix_is_not() -> None:
    assert not transient(KafkaException(KafkaError(KafkaError.GROUP_AUTHORIZATION_FAILED)))
    assert not transient(RuntimeError("payments/0: UNKNOWN_MEMBER_ID"))
    assert not transient(
        RuntimeError(
            "java.util.concurrent.ExecutionException: "
            "org.apache.kafka.common.errors.UnknownMemberIdException: The coordinator is not "
            "aware of this member."
        )
    )


def test_the_java_clients_names_of_a_loading_or_moving_coordinator_are_transient() -> None:
    for name in (
        "CoordinatorLoadInProgressException",
        "CoordinatorNotAvailableException",
        "NotCoordinatorException",
        "TimeoutException",
    ):
        assert transient(
            RuntimeError(
                f"java.util.concurrent.ExecutionException: org.apache.kafka.common.errors."
                f"{name}: the coordinator moved"
            )
        )


def test_offsets_a_loading_coordinator_refused_are_tried_again_even_when_stopping(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A run of one batch: its only offsets meet a coordinator still loading, then the run
    # stops. They must still reach the group (the broker answers, the admin call is faked).
    from frazil.observe import groups

    tries: list[dict[str, dict[int, int]]] = []

    def commit(group: str, offsets: dict[str, dict[int, int]]) -> None:
        tries.append(offsets)
        if len(tries) < 3:
            raise KafkaException(KafkaError(KafkaError.COORDINATOR_LOAD_IN_PROGRESS))

    monkeypatch.setattr(groups, "RETRY_S", 0.01)
    committer = groups.GroupCommitter(commit)
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

    def commit(group: str, offsets: dict[str, dict[int, int]]) -> None:
        tries.append(group)
        raise KafkaException(KafkaError(KafkaError.GROUP_AUTHORIZATION_FAILED))

    committer = groups.GroupCommitter(commit)
    committer.start()
    committer.submit("frazil-p", {"payments": {0: 42}})
    committer.close()
    assert not committer.is_alive()
    assert committer.committed == {} and tries == ["frazil-p"]


def test_the_java_clients_reason_is_what_a_group_commit_reports() -> None:
    from frazil.source.admin import java_cause

    refused = RuntimeError(
        "An error occurred while calling o412.get.\n"
        ": java.util.concurrent.ExecutionException: "
        "org.apache.kafka.common.errors.GroupAuthorizationException: Not authorized to access "
        "group: frazil-p\n\tat java.base/java.util.concurrent.CompletableFuture.get(x.java:1)\n"
        "Caused by: org.apache.kafka.common.errors.GroupAuthorizationException: Not authorized "
        "to access group: frazil-p\n\tat y"
    )
    reason = java_cause(refused)
    assert reason.startswith("org.apache.kafka.common.errors.GroupAuthorizationException")
    assert not transient(RuntimeError(reason))
    waited = RuntimeError(
        "An error occurred while calling o77.get.\n: java.util.concurrent.TimeoutException\n"
        "\tat java.base/java.util.concurrent.CompletableFuture.timedGet(x.java:1)"
    )
    assert java_cause(waited) == "java.util.concurrent.TimeoutException"
    assert transient(RuntimeError(java_cause(waited)))
