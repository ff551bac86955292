"""The reference's process settings."""

from rosetta.backends.numpy_ref.runtime import (  # noqa: F401
    available,
    cuda_available,
    set_tf32,
    set_threads,
    versions,
)
