"""User errors of the evaluation protocol, in a module light enough for the CLI to import at start."""

from __future__ import annotations


class SplitError(ValueError):
    """A split file that is missing, malformed, or no longer matches its question pool."""


class LockedSplitError(SplitError):
    """The test part was requested outside the locked-test protocol."""


class ComparisonError(ValueError):
    """A comparison that cannot be made as asked (unpaired questions, bad family, unknown system)."""


class MeasurementGuardError(ValueError):
    """Two sides of a comparison that cannot measure the change under test."""


class ProtocolError(ValueError):
    """A step of the locked-test protocol taken out of order, or on tampered records."""


class SweepError(ValueError):
    """A sweep that cannot run as configured (search space, split, storage)."""


PROTOCOL_ERRORS: tuple[type[BaseException], ...] = (
    SplitError,
    ComparisonError,
    MeasurementGuardError,
    ProtocolError,
    SweepError,
)
