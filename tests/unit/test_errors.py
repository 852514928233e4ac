from __future__ import annotations

import inspect
import pickle
import warnings
from typing import Any

import pytest

from seglog import errors
from seglog._native import _errors as native_errors
from seglog.errors import (
    ConfigError,
    CorruptRecordError,
    IndeterminateWriteError,
    InvalidConfigError,
    KafkaError,
    KafkaStorageError,
    LogDirectoryLockedError,
    NotEnoughReplicasAfterAppendError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerAfterAppendError,
    NotLeaderOrFollowerBeforeAppendError,
    NotLeaderOrFollowerError,
    NotWrittenError,
    RequestTimedOutError,
    SeglogError,
    StorageError,
    UnknownServerError,
    code_for_exception,
    error_for_code,
    make_error,
    write_outcome,
)

with warnings.catch_warnings():
    # kafka-python's package import uses a deprecated importlib.resources call.
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka.errors as kafka_python_errors

# Apache Kafka's Errors.java (3.9): code -> (protocol name, class name here). Written out
# by hand from Kafka's source, independently of seglog.errors.
KAFKA_ERRORS = {
    -1: ("UNKNOWN_SERVER_ERROR", "UnknownServerError"),
    1: ("OFFSET_OUT_OF_RANGE", "OffsetOutOfRangeError"),
    2: ("CORRUPT_MESSAGE", "CorruptRecordError"),
    3: ("UNKNOWN_TOPIC_OR_PARTITION", "UnknownTopicOrPartitionError"),
    4: ("INVALID_FETCH_SIZE", "InvalidFetchSizeError"),
    5: ("LEADER_NOT_AVAILABLE", "LeaderNotAvailableError"),
    6: ("NOT_LEADER_OR_FOLLOWER", "NotLeaderOrFollowerError"),
    7: ("REQUEST_TIMED_OUT", "RequestTimedOutError"),
    8: ("BROKER_NOT_AVAILABLE", "BrokerNotAvailableError"),
    9: ("REPLICA_NOT_AVAILABLE", "ReplicaNotAvailableError"),
    10: ("MESSAGE_TOO_LARGE", "RecordTooLargeError"),
    11: ("STALE_CONTROLLER_EPOCH", "StaleControllerEpochError"),
    13: ("NETWORK_EXCEPTION", "NetworkError"),
    17: ("INVALID_TOPIC_EXCEPTION", "InvalidTopicError"),
    18: ("RECORD_LIST_TOO_LARGE", "RecordListTooLargeError"),
    19: ("NOT_ENOUGH_REPLICAS", "NotEnoughReplicasError"),
    20: ("NOT_ENOUGH_REPLICAS_AFTER_APPEND", "NotEnoughReplicasAfterAppendError"),
    21: ("INVALID_REQUIRED_ACKS", "InvalidRequiredAcksError"),
    22: ("ILLEGAL_GENERATION", "IllegalGenerationError"),
    32: ("INVALID_TIMESTAMP", "InvalidTimestampError"),
    33: ("UNSUPPORTED_SASL_MECHANISM", "UnsupportedSaslMechanismError"),
    34: ("ILLEGAL_SASL_STATE", "IllegalSaslStateError"),
    35: ("UNSUPPORTED_VERSION", "UnsupportedVersionError"),
    36: ("TOPIC_ALREADY_EXISTS", "TopicAlreadyExistsError"),
    37: ("INVALID_PARTITIONS", "InvalidPartitionsError"),
    38: ("INVALID_REPLICATION_FACTOR", "InvalidReplicationFactorError"),
    39: ("INVALID_REPLICA_ASSIGNMENT", "InvalidReplicaAssignmentError"),
    40: ("INVALID_CONFIG", "InvalidConfigError"),
    41: ("NOT_CONTROLLER", "NotControllerError"),
    42: ("INVALID_REQUEST", "InvalidRequestError"),
    43: ("UNSUPPORTED_FOR_MESSAGE_FORMAT", "UnsupportedForMessageFormatError"),
    44: ("POLICY_VIOLATION", "PolicyViolationError"),
    45: ("OUT_OF_ORDER_SEQUENCE_NUMBER", "OutOfOrderSequenceError"),
    46: ("DUPLICATE_SEQUENCE_NUMBER", "DuplicateSequenceError"),
    47: ("INVALID_PRODUCER_EPOCH", "InvalidProducerEpochError"),
    48: ("INVALID_TXN_STATE", "InvalidTxnStateError"),
    51: ("CONCURRENT_TRANSACTIONS", "ConcurrentTransactionsError"),
    55: ("OPERATION_NOT_ATTEMPTED", "OperationNotAttemptedError"),
    56: ("KAFKA_STORAGE_ERROR", "KafkaStorageError"),
    57: ("LOG_DIR_NOT_FOUND", "LogDirNotFoundError"),
    58: ("SASL_AUTHENTICATION_FAILED", "SaslAuthenticationError"),
    59: ("UNKNOWN_PRODUCER_ID", "UnknownProducerIdError"),
    60: ("REASSIGNMENT_IN_PROGRESS", "ReassignmentInProgressError"),
    70: ("FETCH_SESSION_ID_NOT_FOUND", "FetchSessionIdNotFoundError"),
    71: ("INVALID_FETCH_SESSION_EPOCH", "InvalidFetchSessionEpochError"),
    72: ("LISTENER_NOT_FOUND", "ListenerNotFoundError"),
    74: ("FENCED_LEADER_EPOCH", "FencedLeaderEpochError"),
    75: ("UNKNOWN_LEADER_EPOCH", "UnknownLeaderEpochError"),
    76: ("UNSUPPORTED_COMPRESSION_TYPE", "UnsupportedCompressionTypeError"),
    77: ("STALE_BROKER_EPOCH", "StaleBrokerEpochError"),
    78: ("OFFSET_NOT_AVAILABLE", "OffsetNotAvailableError"),
    80: ("PREFERRED_LEADER_NOT_AVAILABLE", "PreferredLeaderNotAvailableError"),
    83: ("ELIGIBLE_LEADERS_NOT_AVAILABLE", "EligibleLeadersNotAvailableError"),
    84: ("ELECTION_NOT_NEEDED", "ElectionNotNeededError"),
    87: ("INVALID_RECORD", "InvalidRecordError"),
    89: ("THROTTLING_QUOTA_EXCEEDED", "ThrottlingQuotaExceededError"),
    90: ("PRODUCER_FENCED", "ProducerFencedError"),
    100: ("UNKNOWN_TOPIC_ID", "UnknownTopicIdError"),
    103: ("INCONSISTENT_TOPIC_ID", "InconsistentTopicIdError"),
    106: ("FETCH_SESSION_TOPIC_ID_ERROR", "FetchSessionTopicIdError"),
    107: ("INELIGIBLE_REPLICA", "IneligibleReplicaError"),
    108: ("NEW_LEADER_ELECTED", "NewLeaderElectedError"),
}

# Codes whose Java exception extends RetriableException (directly or through
# InvalidMetadataException), per Kafka's common/errors package.
KAFKA_RETRIABLE = {
    2,
    3,
    5,
    6,
    7,
    9,
    13,
    19,
    20,
    41,
    51,
    56,
    70,
    71,
    72,
    74,
    75,
    78,
    80,
    83,
    84,
    89,
    100,
    103,
    106,
}

# kafka-python 3.0 still uses some pre-rename protocol names, and classes CORRUPT_MESSAGE
# as not retriable, unlike Kafka's Java client.
KAFKA_PYTHON_OLD_NAMES = {
    -1: "UNKNOWN",
    6: "NOT_LEADER_FOR_PARTITION",
    10: "MESSAGE_SIZE_TOO_LARGE",
    17: "INVALID_TOPIC",
    39: "INVALID_REPLICATION_ASSIGNMENT",
}
KAFKA_PYTHON_RETRIABLE_DIFFERS = {2}

# How a failed write is classified (docs/replication.md §9.4, "Workload and history").
NOT_WRITTEN_CODES = {2, 3, 5, 10, 17, 18, 19, 21, 32, 43, 45, 47, 59, 76, 87, 90}
INDETERMINATE_CLASSES = {RequestTimedOutError, NotEnoughReplicasAfterAppendError}


def test_codes_names_and_class_names_are_kafkas() -> None:
    for code, (name, class_name) in KAFKA_ERRORS.items():
        cls = getattr(errors, class_name)
        assert cls.code == code, class_name
        assert cls.name == name == cls.error_name, class_name
        assert error_for_code(code) is cls
        assert errors.ERRORS_BY_NAME[name] is cls
        assert class_name in errors.__all__
    assert set(errors.ERRORS_BY_CODE) == set(KAFKA_ERRORS)


def test_retriable_is_kafkas() -> None:
    for code, cls in errors.ERRORS_BY_CODE.items():
        assert cls.retriable is (code in KAFKA_RETRIABLE), cls.__name__


def test_codes_agree_with_kafka_python() -> None:
    theirs: dict[int, Any] = {}  # kafka-python's error classes (untyped)
    for _name, cls in inspect.getmembers(kafka_python_errors, inspect.isclass):
        errno = getattr(cls, "errno", None)
        if issubclass(cls, kafka_python_errors.BrokerResponseError) and errno is not None:
            theirs.setdefault(errno, cls)
    for code, cls in errors.ERRORS_BY_CODE.items():
        other = theirs[code]
        assert KAFKA_PYTHON_OLD_NAMES.get(code, cls.name) == other.message, code
        if code not in KAFKA_PYTHON_RETRIABLE_DIFFERS:
            assert cls.retriable == other.retriable, code


def test_every_error_class_is_named_error_and_exported() -> None:
    for name, obj in vars(errors).items():
        if inspect.isclass(obj) and issubclass(obj, SeglogError):
            assert name.endswith("Error"), name
            assert name in errors.__all__, name
    for name in errors.__all__:
        assert hasattr(errors, name), name


def test_error_for_code_edges() -> None:
    assert error_for_code(12345) is UnknownServerError
    with pytest.raises(ValueError, match="NONE"):
        error_for_code(0)
    exc = make_error(12345)
    assert isinstance(exc, UnknownServerError)
    assert "unknown error code 12345" in str(exc)
    exc = make_error(19, "isr 1 < 2", offset=7)
    assert isinstance(exc, NotEnoughReplicasError)
    assert str(exc) == "isr 1 < 2 (offset 7)"


def test_subclasses_without_code_are_not_registered() -> None:
    assert NotLeaderOrFollowerBeforeAppendError.code == 6
    assert NotLeaderOrFollowerAfterAppendError.name == "NOT_LEADER_OR_FOLLOWER"
    assert error_for_code(6) is NotLeaderOrFollowerError
    with pytest.raises(TypeError, match="already"):

        class Again(KafkaError, code=2, name="X"):
            pass

    with pytest.raises(TypeError, match="protocol name"):

        class Nameless(KafkaError, code=9999):
            pass


def test_default_message_is_the_description() -> None:
    exc = NotEnoughReplicasAfterAppendError()
    assert str(exc) == NotEnoughReplicasAfterAppendError.description
    assert str(RequestTimedOutError("waited 30000 ms")) == "waited 30000 ms"


# -- where a write stands ------------------------------------------------------------------


def test_not_written_classification() -> None:
    for code, cls in errors.ERRORS_BY_CODE.items():
        expected = code in NOT_WRITTEN_CODES
        assert issubclass(cls, NotWrittenError) is expected, cls.__name__
        assert cls.definitely_not_written is expected, cls.__name__
        assert write_outcome(cls()) == ("not_written" if expected else "indeterminate")
        assert not (issubclass(cls, NotWrittenError) and issubclass(cls, IndeterminateWriteError))


def test_indeterminate_classes() -> None:
    for cls in INDETERMINATE_CLASSES | {NotLeaderOrFollowerAfterAppendError}:
        assert issubclass(cls, IndeterminateWriteError)
        assert write_outcome(cls()) == "indeterminate"
    before = NotLeaderOrFollowerBeforeAppendError()
    assert isinstance(before, NotLeaderOrFollowerError)
    assert isinstance(before, NotWrittenError)
    assert write_outcome(before) == "not_written"
    assert write_outcome(NotLeaderOrFollowerError()) == "indeterminate"


def test_foreign_failures_are_indeterminate() -> None:
    for exc in (ConnectionResetError(), TimeoutError(), OSError("x"), RuntimeError()):
        assert write_outcome(exc) == "indeterminate"


def test_definite_and_indeterminate_split_min_isr() -> None:
    # The one pair a checker must never confuse.
    assert write_outcome(NotEnoughReplicasError()) == "not_written"
    assert write_outcome(NotEnoughReplicasAfterAppendError()) == "indeterminate"
    assert NotEnoughReplicasError.code != NotEnoughReplicasAfterAppendError.code


# -- fields and rendering ------------------------------------------------------------------


def test_placeholder_signature_still_works() -> None:
    exc = CorruptRecordError("bad", position=3, path="p.log", offset=9)
    assert (exc.code, exc.position, exc.path, exc.offset, exc.limit) == (2, 3, "p.log", 9, None)


@pytest.mark.parametrize("cls", [cls for _, cls in sorted(errors.ERRORS_BY_CODE.items())])
def test_every_kafka_error_accepts_and_renders_the_fields(cls: type[KafkaError]) -> None:
    exc = cls("went wrong", path="/d/t-0/00000000000000000042.log", offset=42, position=77, limit=9)
    text = str(exc)
    for fragment in ("went wrong", "/d/t-0/00000000000000000042.log", "offset 42", "77", "9"):
        assert fragment in text
    assert (exc.path, exc.offset, exc.position, exc.limit) == (
        "/d/t-0/00000000000000000042.log",
        42,
        77,
        9,
    )
    again = pickle.loads(pickle.dumps(exc))
    assert type(again) is cls
    assert str(again) == text
    assert again.limit == 9


def test_rendering_exact() -> None:
    exc = CorruptRecordError("batch CRC mismatch", path="t-0/0.log", offset=42, position=4096)
    assert str(exc) == "batch CRC mismatch (in t-0/0.log, offset 42, at byte 4096)"
    assert str(CorruptRecordError("plain")) == "plain"
    assert "limit 1048588" in str(errors.RecordTooLargeError("batch of 2000000 bytes", limit=1048588))
    assert repr(CorruptRecordError("m", offset=1)) == "CorruptRecordError('m', offset=1)"


def test_path_like_is_accepted(tmp_path) -> None:
    exc = StorageError("cannot map", path=tmp_path / "x.index")
    assert exc.path == str(tmp_path / "x.index")


def test_storage_errors() -> None:
    exc = StorageError("short read", path="a.log", position=10, limit=20)
    assert isinstance(exc, OSError)
    assert isinstance(exc, SeglogError)
    assert str(exc) == "short read (in a.log, at byte 10, limit 20)"
    assert code_for_exception(exc) == 56
    assert pickle.loads(pickle.dumps(exc)).position == 10
    locked = LogDirectoryLockedError(path="/data")
    assert isinstance(locked, StorageError)
    assert "/data" in str(locked) and "locked" in str(locked)
    kse = KafkaStorageError(path="x")
    assert isinstance(kse, StorageError)
    assert isinstance(kse, KafkaError)
    assert kse.code == 56
    assert kse.retriable


def test_config_errors() -> None:
    exc = ConfigError("bad", key="segment.bytes", value=3, suggestion=None)
    assert isinstance(exc, ValueError)
    assert code_for_exception(exc) == 40
    again = pickle.loads(pickle.dumps(exc))
    assert (again.key, again.value) == ("segment.bytes", 3)
    api = InvalidConfigError(key="x")
    assert isinstance(api, ConfigError)
    assert api.code == 40 and api.key == "x"


def test_code_for_exception() -> None:
    assert code_for_exception(NotEnoughReplicasAfterAppendError()) == 20
    assert code_for_exception(RuntimeError()) == -1
    assert code_for_exception(NotLeaderOrFollowerAfterAppendError()) == 6


# -- the native layer --------------------------------------------------------------------


def test_native_classes_are_installed() -> None:
    assert native_errors._classes == {
        "corrupt_index": errors.CorruptIndexError,
        "index_full": errors.IndexFullError,
        "invalid_offset": errors.InvalidOffsetError,
        "corrupt_record": CorruptRecordError,
        "invalid_record": errors.InvalidRecordError,
        "invalid_timestamp": errors.InvalidTimestampError,
        "record_too_large": errors.RecordTooLargeError,
        "record_list_too_large": errors.RecordListTooLargeError,
        "unsupported_compression": errors.UnsupportedCompressionTypeError,
        "unknown_topic_or_partition": errors.UnknownTopicOrPartitionError,
        "storage": KafkaStorageError,
    }


@pytest.mark.parametrize(
    "kind",
    ["corrupt_record", "invalid_record", "record_too_large", "unsupported_compression", "storage"],
)
def test_native_make_passes_every_field(kind: str) -> None:
    exc = native_errors.make(kind, "boom", path="f.log", offset=1, position=2, limit=3)
    assert isinstance(exc, SeglogError)
    assert (exc.path, exc.offset, exc.position, exc.limit) == ("f.log", 1, 2, 3)
    assert str(exc) == "boom (in f.log, offset 1, at byte 2, limit 3)"


def test_native_corrupt_folds_the_position() -> None:
    exc = native_errors.corrupt("bad batch length", 96, path="s.log")
    assert isinstance(exc, CorruptRecordError)
    assert exc.position == 96
    assert exc.message == "bad batch length (at byte 96)"
    assert str(exc) == "bad batch length (in s.log, at byte 96)"
    assert str(native_errors.corrupt("x", 5)) == "x (at byte 5)"


def test_native_extra_fields_fall_back_to_attributes() -> None:
    exc = native_errors.make("corrupt_record", "crc", position=4, expected=1, actual=2)
    assert isinstance(exc, CorruptRecordError)
    assert (exc.position, exc.expected, exc.actual) == (4, 1, 2)  # type: ignore[attr-defined]
    assert str(exc) == "crc (at byte 4)"


def test_a_path_the_message_names_is_not_repeated() -> None:
    err = errors.LogDirectoryLockedError(
        "the log directory /data/kafka is locked by another process", path="/data/kafka"
    )
    assert str(err) == "the log directory /data/kafka is locked by another process"
    # a message that does not name it still gets it
    assert str(errors.CorruptRecordError("batch CRC mismatch", path="t-0/a.log", offset=4)) == (
        "batch CRC mismatch (in t-0/a.log, offset 4)"
    )
