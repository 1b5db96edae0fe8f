"""Errors that gnnq reports to the user as one line, without a traceback."""

import errno


class GnnqError(Exception):
    """Base class: the message is complete and fits on one line."""


class ConfigError(GnnqError):
    """A config key holds a value that is not allowed."""


class DatasetError(GnnqError):
    """A dataset cannot be found, downloaded or read."""


class PartitionError(GnnqError):
    """A graph cannot be partitioned as asked."""


class CacheError(GnnqError):
    """A cached file (partition parts, GA-MLP features) is missing, unreadable or fails its checksum."""


class LaunchError(GnnqError):
    """The distributed job could not be started or one of its ranks failed."""


def describe_os_error(exc: OSError) -> str:
    """``No space left on device (ENOSPC)``: an OSError's reason and its errno name, for a one-line message."""
    name = errno.errorcode.get(exc.errno or 0)
    reason = exc.strerror or type(exc).__name__
    return f"{reason} ({name})" if name else reason
