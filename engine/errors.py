"""seglog's exception hierarchy.

Every error seglog raises on purpose is a :class:`SeglogError`. Below it:

``KafkaError``
    Errors that have an Apache Kafka protocol error code. Each class carries ``code`` (the
    wire code), ``name`` / ``error_name`` (Kafka's protocol name, e.g. ``"CORRUPT_MESSAGE"``)
    and ``retriable`` (whether Kafka classes it as a ``RetriableException``). Class names
    follow Kafka's exception names with ``Error`` in place of ``Exception``.
    :func:`error_for_code` maps a wire code back to its class.

``StorageError``
    Local disk and file problems (also an :class:`OSError`). Over the wire they travel as
    ``KAFKA_STORAGE_ERROR`` (56); :class:`KafkaStorageError` is both.

``ConfigError``
    A bad configuration key or value (also a :class:`ValueError`). ``InvalidConfigError``
    is the protocol form (``INVALID_CONFIG``, 40) and is a ``ConfigError`` too.

Where a write stands after an error
-----------------------------------
A producer must tell "this write is definitely not in the log" from "this write may be in
the log". Two mixins say which:

* :class:`NotWrittenError` — rejected before anything was appended (for example
  ``NotEnoughReplicasError``: the ISR was below ``min.insync.replicas`` when the request
  arrived). Retrying cannot create a duplicate.
* :class:`IndeterminateWriteError` — the leader may have appended the records, and they may
  yet become visible or be truncated away (``NotEnoughReplicasAfterAppendError``,
  ``RequestTimedOutError``, ``NotLeaderOrFollowerAfterAppendError``). Retrying without
  idempotence may duplicate.

Any other failure of a write — connection loss, an unknown server error, a plain
``NotLeaderOrFollowerError`` whose timing is not known — must be treated as indeterminate;
:func:`write_outcome` applies that rule. Each class also has the boolean class attribute
``definitely_not_written``.

Location fields
---------------
Every ``SeglogError`` accepts the keyword fields ``path``, ``offset``, ``position`` (byte
position in the file) and ``limit`` (the limit that was exceeded), keeps them as attributes
and names them in ``str(exc)``::

    >>> str(CorruptRecordError("batch CRC mismatch", path="t-0/00000000000000000000.log",
    ...                        offset=42, position=4096))
    'batch CRC mismatch (in t-0/00000000000000000000.log, offset 42, at byte 4096)'

The native modules raise through ``seglog._native._errors``; importing this module installs
these classes there.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, ClassVar, Literal, TypedDict

from seglog._native import _errors as _native_errors

if TYPE_CHECKING:
    from typing_extensions import Unpack  # typing.Unpack is Python 3.11+

__all__ = [
    "ERRORS_BY_CODE",
    "ERRORS_BY_NAME",
    "BrokerNotAvailableError",
    "ConcurrentTransactionsError",
    "ConfigError",
    "CorruptIndexError",
    "CorruptRecordError",
    "DuplicateSequenceError",
    "ElectionNotNeededError",
    "EligibleLeadersNotAvailableError",
    "FencedLeaderEpochError",
    "FetchSessionIdNotFoundError",
    "FetchSessionTopicIdError",
    "IllegalGenerationError",
    "IllegalSaslStateError",
    "InconsistentTopicIdError",
    "IndeterminateWriteError",
    "IndexFullError",
    "IneligibleReplicaError",
    "InvalidConfigError",
    "InvalidFetchSessionEpochError",
    "InvalidFetchSizeError",
    "InvalidOffsetError",
    "InvalidPartitionsError",
    "InvalidProducerEpochError",
    "InvalidRecordError",
    "InvalidReplicaAssignmentError",
    "InvalidReplicationFactorError",
    "InvalidRequestError",
    "InvalidRequiredAcksError",
    "InvalidTimestampError",
    "InvalidTopicError",
    "InvalidTxnStateError",
    "KafkaError",
    "KafkaStorageError",
    "LeaderNotAvailableError",
    "ListenerNotFoundError",
    "Location",
    "LogDirNotFoundError",
    "LogDirectoryLockedError",
    "NetworkError",
    "NewLeaderElectedError",
    "NotControllerError",
    "NotEnoughReplicasAfterAppendError",
    "NotEnoughReplicasError",
    "NotLeaderOrFollowerAfterAppendError",
    "NotLeaderOrFollowerBeforeAppendError",
    "NotLeaderOrFollowerError",
    "NotWrittenError",
    "OffsetNotAvailableError",
    "OffsetOutOfRangeError",
    "OperationNotAttemptedError",
    "OutOfOrderSequenceError",
    "PolicyViolationError",
    "PreferredLeaderNotAvailableError",
    "ProducerFencedError",
    "ReassignmentInProgressError",
    "RecordListTooLargeError",
    "RecordTooLargeError",
    "ReplicaNotAvailableError",
    "RequestTimedOutError",
    "SaslAuthenticationError",
    "SeglogError",
    "SslAuthenticationError",
    "StaleBrokerEpochError",
    "StaleControllerEpochError",
    "StorageError",
    "ThrottlingQuotaExceededError",
    "TopicAlreadyExistsError",
    "UnknownLeaderEpochError",
    "UnknownProducerIdError",
    "UnknownServerError",
    "UnknownTopicIdError",
    "UnknownTopicOrPartitionError",
    "UnsupportedCompressionTypeError",
    "UnsupportedForMessageFormatError",
    "UnsupportedSaslMechanismError",
    "UnsupportedVersionError",
    "code_for_exception",
    "error_for_code",
    "make_error",
    "write_outcome",
]


class Location(TypedDict, total=False):
    """The location fields every :class:`SeglogError` takes as keywords (the subclasses pass
    them on as ``**where``)."""

    path: str | os.PathLike[str] | None
    offset: int | None
    position: int | None
    limit: int | None


class SeglogError(Exception):
    """Base of every error seglog raises on purpose.

    ``message`` says what was wrong; the optional keyword fields say where: ``path`` (the
    file), ``offset`` (the log offset), ``position`` (the byte position in the file) and
    ``limit`` (the limit that was exceeded). Given fields are appended to ``str(exc)``.
    """

    #: True when the failed write is known not to be in the log (see :class:`NotWrittenError`).
    definitely_not_written: ClassVar[bool] = False

    path: str | None
    offset: int | None
    position: int | None
    limit: int | None

    def __init__(
        self,
        message: str = "",
        *,
        path: str | os.PathLike[str] | None = None,
        offset: int | None = None,
        position: int | None = None,
        limit: int | None = None,
    ) -> None:
        # Only ``message`` goes into ``args``: pickling rebuilds the exception as
        # ``cls(*args)`` and then restores the fields from ``__dict__``.
        super().__init__(message)
        self.path = None if path is None else os.fspath(path)
        self.offset = offset
        self.position = position
        self.limit = limit

    @property
    def message(self) -> str:
        """The message without the location fields."""
        return str(self.args[0]) if self.args else ""

    def __str__(self) -> str:
        message = self.message
        # The native layer writes "msg (at byte N)"; fold that into the one group below.
        if self.position is not None and message.endswith(f" (at byte {self.position})"):
            message = message[: -len(f" (at byte {self.position})")]
        where = []
        # A field already spelled out in the message (the native layer writes "at byte N")
        # is not repeated.
        for fragment in (
            # the path, unless the message already names it ("the log directory /x is locked")
            None if self.path is None or self.path in message else f"in {self.path}",
            None if self.offset is None else f"offset {self.offset}",
            None if self.position is None else f"at byte {self.position}",
            None if self.limit is None else f"limit {self.limit}",
        ):
            if fragment is not None and fragment not in message:
                where.append(fragment)
        if not where:
            return message
        if not message:
            return ", ".join(where)
        return f"{message} ({', '.join(where)})"

    def __repr__(self) -> str:
        fields = [repr(self.message)]
        for name in ("path", "offset", "position", "limit"):
            value = getattr(self, name, None)
            if value is not None:
                fields.append(f"{name}={value!r}")
        return f"{type(self).__name__}({', '.join(fields)})"


class NotWrittenError(SeglogError):
    """Mixin: the write was rejected before anything was appended to the log.

    Retrying the same records cannot produce a duplicate. Raised for example when the ISR
    is below ``min.insync.replicas`` on arrival, for an invalid or oversized batch, a
    producer-sequence gap, or a fenced producer epoch.
    """

    definitely_not_written: ClassVar[bool] = True


class IndeterminateWriteError(SeglogError):
    """Mixin: the records may be in the leader's log, and may still become visible.

    Nothing can be concluded: the write may become committed (and readable), or it may be
    truncated away by a later leader. Only an idempotent producer may retry without risking
    a duplicate.
    """

    definitely_not_written: ClassVar[bool] = False


class StorageError(SeglogError, OSError):
    """A local storage problem: a file that cannot be read, written, mapped or trusted.

    Carries ``path``, ``offset``, ``position`` and ``limit`` as available. Over the wire it
    travels as ``KAFKA_STORAGE_ERROR`` (56), see :func:`code_for_exception`.
    """

    # SeglogError's __init__ comes first in the MRO; OSError's own __str__ would ignore the
    # fields.
    __str__ = SeglogError.__str__
    __repr__ = SeglogError.__repr__


class LogDirectoryLockedError(StorageError):
    """Another writer holds the log directory (a store, a replica node or a Kafka broker), or the
    partition (another writable ``Log``), in this process or another."""

    def __init__(self, message: str = "", **where: Unpack[Location]) -> None:
        if not message:
            message = "the log directory is locked by another process or another open store; close that one first"
        super().__init__(message, **where)


class ConfigError(SeglogError, ValueError):
    """A configuration key is unknown or its value is of the wrong type or out of range.

    ``key`` is the dotted Kafka key concerned (``None`` for a whole-file problem), ``value``
    the offending value, ``suggestion`` the nearest valid key for an unknown one.
    """

    key: str | None
    value: Any
    suggestion: str | None

    def __init__(
        self,
        message: str = "",
        *,
        key: str | None = None,
        value: Any = None,
        suggestion: str | None = None,
        **where: Unpack[Location],
    ) -> None:
        SeglogError.__init__(self, message, **where)
        self.key = key
        self.value = value
        self.suggestion = suggestion


# --------------------------------------------------------------------------------------
# Kafka protocol errors
# --------------------------------------------------------------------------------------

#: code -> class, for every Kafka error defined here.
ERRORS_BY_CODE: dict[int, type[KafkaError]] = {}
#: Kafka protocol name -> class.
ERRORS_BY_NAME: dict[str, type[KafkaError]] = {}


class KafkaError(SeglogError):
    """An error with an Apache Kafka protocol error code.

    Subclasses are declared with their code, Kafka protocol name and retriability::

        class CorruptRecordError(NotWrittenError, KafkaError,
                                 code=2, name="CORRUPT_MESSAGE", retriable=True): ...

    and registered for :func:`error_for_code`. A subclass declared without ``code``
    refines its parent (same code) and is not registered.
    """

    code: ClassVar[int] = -1
    name: ClassVar[str] = "UNKNOWN_SERVER_ERROR"
    #: Same as ``name`` (Kafka's ``Errors`` enum constant).
    error_name: ClassVar[str] = "UNKNOWN_SERVER_ERROR"
    retriable: ClassVar[bool] = False
    #: A short description; the message when none is given.
    description: ClassVar[str] = "The server failed in an unexpected way."

    def __init_subclass__(
        cls,
        *,
        code: int | None = None,
        name: str | None = None,
        retriable: bool | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init_subclass__(**kwargs)
        if retriable is not None:
            cls.retriable = retriable
        if code is None:
            if name is not None:
                raise TypeError(f"{cls.__name__}: a name needs a code")
            return
        if name is None:
            raise TypeError(f"{cls.__name__}: code {code} needs its Kafka protocol name")
        if code in ERRORS_BY_CODE:
            raise TypeError(f"{cls.__name__}: code {code} is already {ERRORS_BY_CODE[code].__name__}")
        cls.code = code
        cls.name = name
        cls.error_name = name
        ERRORS_BY_CODE[code] = cls
        ERRORS_BY_NAME[name] = cls

    def __init__(self, message: str | None = None, **where: Unpack[Location]) -> None:
        SeglogError.__init__(self, self.description if message is None else message, **where)


# Codes, names and retriability are Apache Kafka's (clients' protocol/Errors.java and the
# RetriableException / InvalidMetadataException subclasses in common/errors), as of 3.9.


class UnknownServerError(KafkaError, code=-1, name="UNKNOWN_SERVER_ERROR", retriable=False):
    description = "The server failed in an unexpected way."


class OffsetOutOfRangeError(KafkaError, code=1, name="OFFSET_OUT_OF_RANGE", retriable=False):
    description = "The offset is outside the range held by the log."


class CorruptRecordError(NotWrittenError, KafkaError, code=2, name="CORRUPT_MESSAGE", retriable=True):
    description = "A record batch failed its CRC, has an impossible size, or is otherwise corrupt."


class UnknownTopicOrPartitionError(
    NotWrittenError, KafkaError, code=3, name="UNKNOWN_TOPIC_OR_PARTITION", retriable=True
):
    description = "This node does not host that topic-partition."


class InvalidFetchSizeError(KafkaError, code=4, name="INVALID_FETCH_SIZE", retriable=False):
    description = "The requested fetch size is invalid."


class LeaderNotAvailableError(NotWrittenError, KafkaError, code=5, name="LEADER_NOT_AVAILABLE", retriable=True):
    description = "The partition has no leader at the moment (an election is in progress)."


class NotLeaderOrFollowerError(KafkaError, code=6, name="NOT_LEADER_OR_FOLLOWER", retriable=True):
    """This node is not the leader (or not a replica) of the partition.

    Raised bare, the timing is unknown and a write must be treated as indeterminate. The
    two subclasses say when it happened: before the append (nothing written) or while an
    appended ``acks=all`` write waited for the ISR (indeterminate).
    """

    description = "This node is not the leader, or not a replica, of that partition."


class NotLeaderOrFollowerBeforeAppendError(NotWrittenError, NotLeaderOrFollowerError):
    description = "This node is not the leader of that partition; nothing was appended."


class NotLeaderOrFollowerAfterAppendError(IndeterminateWriteError, NotLeaderOrFollowerError):
    description = "Leadership moved while the appended records waited for the ISR; they may or may not survive."


class RequestTimedOutError(IndeterminateWriteError, KafkaError, code=7, name="REQUEST_TIMED_OUT", retriable=True):
    description = "The request timed out; a write may or may not have been committed."


class BrokerNotAvailableError(KafkaError, code=8, name="BROKER_NOT_AVAILABLE", retriable=False):
    description = "The node is not available."


class SslAuthenticationError(BrokerNotAvailableError):
    """A client's TLS handshake failed on the broker's certificate (not signed by a trusted CA,
    or not naming the host), as Kafka's clients' ``SslAuthenticationException``: asking again
    cannot help, so clients give up at once instead of retrying. Not a wire error: brokers never
    send it."""

    description = "The broker's TLS certificate is not trusted."


class ReplicaNotAvailableError(KafkaError, code=9, name="REPLICA_NOT_AVAILABLE", retriable=True):
    description = "The replica is not available for that topic-partition."


class RecordTooLargeError(NotWrittenError, KafkaError, code=10, name="MESSAGE_TOO_LARGE", retriable=False):
    description = "A record batch is larger than the largest the log accepts (max.message.bytes)."


class StaleControllerEpochError(KafkaError, code=11, name="STALE_CONTROLLER_EPOCH", retriable=False):
    description = "The request came from a controller that has since been replaced."


class NetworkError(KafkaError, code=13, name="NETWORK_EXCEPTION", retriable=True):
    description = "The connection closed before a response was received."


class InvalidTopicError(NotWrittenError, KafkaError, code=17, name="INVALID_TOPIC_EXCEPTION", retriable=False):
    description = "The topic name is invalid, or the topic may not be written."


class RecordListTooLargeError(NotWrittenError, KafkaError, code=18, name="RECORD_LIST_TOO_LARGE", retriable=False):
    description = "The record batches of the request are larger than a segment (segment.bytes)."


class NotEnoughReplicasError(NotWrittenError, KafkaError, code=19, name="NOT_ENOUGH_REPLICAS", retriable=True):
    description = "The in-sync replicas were fewer than min.insync.replicas; nothing was appended."


class NotEnoughReplicasAfterAppendError(
    IndeterminateWriteError,
    KafkaError,
    code=20,
    name="NOT_ENOUGH_REPLICAS_AFTER_APPEND",
    retriable=True,
):
    description = (
        "The records were appended to the leader, but the ISR shrank below "
        "min.insync.replicas before they were committed; they may still become visible."
    )


class InvalidRequiredAcksError(NotWrittenError, KafkaError, code=21, name="INVALID_REQUIRED_ACKS", retriable=False):
    description = "acks must be 0, 1 or -1 (all)."


class IllegalGenerationError(KafkaError, code=22, name="ILLEGAL_GENERATION", retriable=False):
    description = "The group generation id is not valid."


class InvalidTimestampError(NotWrittenError, KafkaError, code=32, name="INVALID_TIMESTAMP", retriable=False):
    description = "A record timestamp is outside the range the topic accepts."


class UnsupportedSaslMechanismError(KafkaError, code=33, name="UNSUPPORTED_SASL_MECHANISM", retriable=False):
    description = "The broker does not support the requested SASL mechanism."


class IllegalSaslStateError(KafkaError, code=34, name="ILLEGAL_SASL_STATE", retriable=False):
    description = "A request is not valid given the current SASL state."


class UnsupportedVersionError(KafkaError, code=35, name="UNSUPPORTED_VERSION", retriable=False):
    description = "The request version is not supported."


class TopicAlreadyExistsError(KafkaError, code=36, name="TOPIC_ALREADY_EXISTS", retriable=False):
    description = "A topic with that name already exists."


class InvalidPartitionsError(KafkaError, code=37, name="INVALID_PARTITIONS", retriable=False):
    description = "The number of partitions is invalid (below 1, or a decrease)."


class InvalidReplicationFactorError(KafkaError, code=38, name="INVALID_REPLICATION_FACTOR", retriable=False):
    description = "The replication factor is below 1 or above the number of available nodes."


class InvalidReplicaAssignmentError(KafkaError, code=39, name="INVALID_REPLICA_ASSIGNMENT", retriable=False):
    description = "The replica assignment is invalid."


class InvalidConfigError(ConfigError, KafkaError, code=40, name="INVALID_CONFIG", retriable=False):
    """The protocol form of :class:`ConfigError` (a bad config sent over the wire)."""

    description = "The configuration is invalid."

    def __init__(
        self,
        message: str | None = None,
        *,
        key: str | None = None,
        value: Any = None,
        suggestion: str | None = None,
        **where: Unpack[Location],
    ) -> None:
        message = self.description if message is None else message
        ConfigError.__init__(self, message, key=key, value=value, suggestion=suggestion, **where)


class NotControllerError(KafkaError, code=41, name="NOT_CONTROLLER", retriable=True):
    description = "This node is not the active controller."


class InvalidRequestError(KafkaError, code=42, name="INVALID_REQUEST", retriable=False):
    description = "The request is malformed."


class UnsupportedForMessageFormatError(
    NotWrittenError,
    KafkaError,
    code=43,
    name="UNSUPPORTED_FOR_MESSAGE_FORMAT",
    retriable=False,
):
    description = "The request needs a newer record format than the log uses."


class PolicyViolationError(KafkaError, code=44, name="POLICY_VIOLATION", retriable=False):
    description = "The request violates a configured policy."


class OutOfOrderSequenceError(
    NotWrittenError,
    KafkaError,
    code=45,
    name="OUT_OF_ORDER_SEQUENCE_NUMBER",
    retriable=False,
):
    description = "The producer sequence number does not follow the last one written."


class DuplicateSequenceError(KafkaError, code=46, name="DUPLICATE_SEQUENCE_NUMBER", retriable=False):
    """The batch was already written by an earlier attempt.

    Not a :class:`NotWrittenError`: the records *are* in the log, at the original offsets.
    """

    description = "The batch repeats a sequence number that is already in the log."


class InvalidProducerEpochError(NotWrittenError, KafkaError, code=47, name="INVALID_PRODUCER_EPOCH", retriable=False):
    description = "The producer epoch is older than the current one."


class InvalidTxnStateError(KafkaError, code=48, name="INVALID_TXN_STATE", retriable=False):
    description = "The transactional operation is invalid in the current state."


class ConcurrentTransactionsError(KafkaError, code=51, name="CONCURRENT_TRANSACTIONS", retriable=True):
    description = "Another operation on the same transaction is in progress."


class OperationNotAttemptedError(KafkaError, code=55, name="OPERATION_NOT_ATTEMPTED", retriable=False):
    description = "The operation was not attempted because another part of the request failed."


class KafkaStorageError(StorageError, KafkaError, code=56, name="KAFKA_STORAGE_ERROR", retriable=True):
    """A disk error on the node, in protocol form; also a :class:`StorageError`."""

    description = "A disk error occurred while accessing a log file."

    def __init__(self, message: str | None = None, **where: Unpack[Location]) -> None:
        # KafkaError's: the description when no message is given (StorageError, whose
        # __init__ has no such default, comes first in the MRO).
        KafkaError.__init__(self, message, **where)


class SaslAuthenticationError(KafkaError, code=58, name="SASL_AUTHENTICATION_FAILED", retriable=False):
    description = "SASL authentication failed."


class LogDirNotFoundError(KafkaError, code=57, name="LOG_DIR_NOT_FOUND", retriable=False):
    description = "The log directory is not one of this node's log.dirs."


class UnknownProducerIdError(NotWrittenError, KafkaError, code=59, name="UNKNOWN_PRODUCER_ID", retriable=False):
    description = "The node has no state for that producer id (it may have expired)."


class ReassignmentInProgressError(KafkaError, code=60, name="REASSIGNMENT_IN_PROGRESS", retriable=False):
    description = "A partition reassignment is in progress."


class FetchSessionIdNotFoundError(KafkaError, code=70, name="FETCH_SESSION_ID_NOT_FOUND", retriable=True):
    description = "The fetch session id is unknown."


class InvalidFetchSessionEpochError(KafkaError, code=71, name="INVALID_FETCH_SESSION_EPOCH", retriable=True):
    description = "The fetch session epoch is not the expected one."


class ListenerNotFoundError(KafkaError, code=72, name="LISTENER_NOT_FOUND", retriable=True):
    description = "The leader has no listener matching the one the request came in on."


class FencedLeaderEpochError(KafkaError, code=74, name="FENCED_LEADER_EPOCH", retriable=True):
    description = "The leader epoch in the request is older than the node's."


class UnknownLeaderEpochError(KafkaError, code=75, name="UNKNOWN_LEADER_EPOCH", retriable=True):
    description = "The leader epoch in the request is newer than the node's."


class UnsupportedCompressionTypeError(
    NotWrittenError,
    KafkaError,
    ValueError,
    code=76,
    name="UNSUPPORTED_COMPRESSION_TYPE",
    retriable=False,
):
    description = "The compression codec is unknown or not supported here."


class StaleBrokerEpochError(KafkaError, code=77, name="STALE_BROKER_EPOCH", retriable=False):
    description = "The broker epoch is stale (the node restarted)."


class OffsetNotAvailableError(KafkaError, code=78, name="OFFSET_NOT_AVAILABLE", retriable=True):
    description = "The new leader's high watermark has not yet reached its epoch start offset; retry the offset lookup."


class PreferredLeaderNotAvailableError(KafkaError, code=80, name="PREFERRED_LEADER_NOT_AVAILABLE", retriable=True):
    description = "The preferred leader is not available."


class EligibleLeadersNotAvailableError(KafkaError, code=83, name="ELIGIBLE_LEADERS_NOT_AVAILABLE", retriable=True):
    description = "No eligible replica is available to lead the partition."


class ElectionNotNeededError(KafkaError, code=84, name="ELECTION_NOT_NEEDED", retriable=True):
    description = "The partition already has the leader the election would choose."


class InvalidRecordError(NotWrittenError, KafkaError, code=87, name="INVALID_RECORD", retriable=False):
    description = "A record failed validation and the batch was rejected."


class ThrottlingQuotaExceededError(KafkaError, code=89, name="THROTTLING_QUOTA_EXCEEDED", retriable=True):
    description = "A throttling quota was exceeded."


class ProducerFencedError(NotWrittenError, KafkaError, code=90, name="PRODUCER_FENCED", retriable=False):
    description = "A newer producer with the same transactional id has fenced this one."


class UnknownTopicIdError(KafkaError, code=100, name="UNKNOWN_TOPIC_ID", retriable=True):
    description = "This node does not host a topic with that id."


class InconsistentTopicIdError(KafkaError, code=103, name="INCONSISTENT_TOPIC_ID", retriable=True):
    description = "The log's topic id does not match the one in the request."


class FetchSessionTopicIdError(KafkaError, code=106, name="FETCH_SESSION_TOPIC_ID_ERROR", retriable=True):
    description = "The fetch session names topics by id and the request by name, or the other way round."


class IneligibleReplicaError(KafkaError, code=107, name="INELIGIBLE_REPLICA", retriable=False):
    description = "The proposed ISR contains a replica that may not join it."


class NewLeaderElectedError(KafkaError, code=108, name="NEW_LEADER_ELECTED", retriable=False):
    description = "The partition state was updated, but a new leader has been elected."


def error_for_code(code: int) -> type[KafkaError]:
    """The class for a Kafka error code.

    Unknown codes map to :class:`UnknownServerError`, as Kafka's clients do. Code 0 means
    "no error" and raises :class:`ValueError`.
    """
    if code == 0:
        raise ValueError("error code 0 is NONE (success), not an error")
    return ERRORS_BY_CODE.get(code, UnknownServerError)


def make_error(code: int, message: str | None = None, **fields: Any) -> KafkaError:
    """An instance of :func:`error_for_code` ``(code)``; an unknown code is named in the message."""
    cls = error_for_code(code)
    if cls is UnknownServerError and code != UnknownServerError.code:
        message = f"{message or cls.description} (unknown error code {code})"
    return cls(message, **fields)


def code_for_exception(exc: BaseException) -> int:
    """The Kafka error code that reports ``exc`` over the wire.

    Kafka errors use their own code; other storage errors ``KAFKA_STORAGE_ERROR`` (56);
    other config errors ``INVALID_CONFIG`` (40); anything else ``UNKNOWN_SERVER_ERROR``
    (-1).
    """
    if isinstance(exc, KafkaError):
        return exc.code
    if isinstance(exc, StorageError):
        return KafkaStorageError.code
    if isinstance(exc, ConfigError):
        return InvalidConfigError.code
    return UnknownServerError.code


def write_outcome(exc: BaseException) -> Literal["not_written", "indeterminate"]:
    """Classify a failed write: ``"not_written"`` only for a :class:`NotWrittenError`.

    Everything else (including timeouts, connection loss and errors from outside seglog)
    is ``"indeterminate"``: the records may be in the log.
    """
    if isinstance(exc, NotWrittenError):
        return "not_written"
    return "indeterminate"


class CorruptIndexError(StorageError, ValueError):
    """An offset or time index file fails its checks (Kafka's ``CorruptIndexException``): the
    segment's indexes are rebuilt from the log."""


class IndexFullError(StorageError, ValueError):
    """An append to an index that has no room left (the segment must roll first)."""


class InvalidOffsetError(StorageError, ValueError):
    """An index entry that would break the index's order, or an offset that cannot be stored
    relative to the segment's base offset (Kafka's ``InvalidOffsetException``)."""


_native_errors.install(
    corrupt_index=CorruptIndexError,
    index_full=IndexFullError,
    invalid_offset=InvalidOffsetError,
    corrupt_record=CorruptRecordError,
    invalid_record=InvalidRecordError,
    invalid_timestamp=InvalidTimestampError,
    record_too_large=RecordTooLargeError,
    record_list_too_large=RecordListTooLargeError,
    unknown_topic_or_partition=UnknownTopicOrPartitionError,
    unsupported_compression=UnsupportedCompressionTypeError,
    storage=KafkaStorageError,
)
