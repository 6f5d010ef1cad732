"""Consumer-group commits: which failures are normal events (INFO) and which are not."""

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
