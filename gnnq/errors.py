"""Errors that gnnq reports to the user as one line, without a traceback."""


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
