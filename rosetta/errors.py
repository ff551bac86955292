"""The one exception type the CLI turns into a one-line message and a non-zero exit."""


class RosettaError(Exception):
    """A user-facing error: its message is one line naming what is wrong and how to fix it."""


class SpecError(RosettaError):
    """A workload spec file is malformed (names the file, the field and what was expected)."""


class DataError(RosettaError):
    """A data file is missing, corrupt, unsafe or of the wrong format."""


class BackendError(RosettaError):
    """A backend is unknown, not installed, or cannot lower an op of the spec."""
