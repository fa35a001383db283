"""The one error type the codec raises: it always names the stream and the byte position."""

from __future__ import annotations


class BinlogError(Exception):
    """Malformed or unsupported binlog input at a known position of a named stream."""

    def __init__(self, reason: str, position: int | None = None, source: str = "<binlog>") -> None:
        self.reason = reason
        self.position = position
        self.source = source
        super().__init__(str(self))

    def __reduce__(self) -> tuple[object, ...]:  # keep the fields across process boundaries
        return (type(self), (self.reason, self.position, self.source))

    def __str__(self) -> str:
        where = f" at byte {self.position}" if self.position is not None else ""
        return f"{self.source}{where}: {self.reason}"

    def located(self, source: str, position: int | None = None) -> BinlogError:
        """Attach the stream name (and the event's position when the codec did not know it)."""
        self.source = source
        if self.position is None:
            self.position = position
        self.args = (str(self),)
        return self


class EncryptedBinlogError(BinlogError):
    """MariaDB START_ENCRYPTION_EVENT: the rest of the stream is encrypted."""
